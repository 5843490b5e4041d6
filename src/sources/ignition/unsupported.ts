import { fieldPath } from '../../errors.js';
import type { IssueList } from './issues.js';
import { isRecord } from '../../util/is-record.js';

/**
 * The Ignition v3 (3.0.0–3.6.0) field tree, marking what stagedroot applies and what it
 * does not. A field marked `U` (disks, RAID, filesystems, LUKS, kernel arguments, user
 * creation, remote fetch settings, ...) is rejected when it holds anything: applying a
 * config without it would not give the machine the config asked for. A key Ignition does
 * not have at all is a warning and is dropped, as Ignition itself warns about unknown
 * keys and goes on (a leftover spec-2 `"filesystem": "root"` on a file entry, say).
 * Empty values (null, [], {}) are what Go encoders emit for unset fields (a
 * machine-config-operator rendered config carries
 * `"config":{"replace":{"verification":{}}},"proxy":{},"security":{"tls":{}}`), so they
 * count as absent.
 *
 * To apply a field stagedroot does not apply yet (`kernelArguments`, say), give it its
 * shape here instead of `U`, a schema in schema.ts and a step in plan.ts.
 */
type Shape = { obj: Record<string, Shape | 'U' | 'leaf'> } | { list: Shape } | 'resource';

const U = 'U' as const;
const leaf = 'leaf' as const;
const owner: Shape = { obj: { id: leaf, name: leaf } };
const resource: Shape = 'resource';

const CONFIG: Shape = {
  obj: {
    ignition: { obj: { version: leaf, config: U, timeouts: U, security: U, proxy: U } },
    storage: {
      obj: {
        disks: U,
        raid: U,
        filesystems: U,
        luks: U,
        files: { list: { obj: { path: leaf, overwrite: leaf, contents: resource, append: { list: resource }, mode: leaf, user: owner, group: owner } } },
        directories: { list: { obj: { path: leaf, overwrite: leaf, mode: leaf, user: owner, group: owner } } },
        links: { list: { obj: { path: leaf, overwrite: leaf, user: owner, group: owner, target: leaf, hard: leaf } } },
      },
    },
    systemd: { obj: { units: { list: { obj: { name: leaf, enabled: leaf, mask: leaf, contents: leaf, dropins: { list: { obj: { name: leaf, contents: leaf } } } } } } } },
    passwd: {
      obj: {
        users: {
          list: {
            obj: {
              name: leaf,
              sshAuthorizedKeys: leaf,
              passwordHash: U,
              uid: U,
              gecos: U,
              homeDir: U,
              noCreateHome: U,
              primaryGroup: U,
              groups: U,
              noUserGroup: U,
              noLogInit: U,
              shell: U,
              shouldExist: U,
              system: U,
            },
          },
        },
        groups: U,
      },
    },
    kernelArguments: { obj: { shouldExist: leaf, shouldNotExist: leaf } },
  },
};

const RESOURCE_FIELDS: Record<string, Shape | 'U' | 'leaf'> = { source: leaf, compression: leaf, verification: { obj: { hash: leaf } }, httpHeaders: U };

/** null, [], {} and objects holding only those: what an encoder writes for "unset". */
export function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isRecord(v)) return Object.values(v).every(isEmpty);
  return false;
}

/**
 * Lists every unsupported field path (and every non-data: source) in `doc` as an error
 * and every unknown key as a warning, and returns the document without its unknown keys
 * and empty non-leaf fields, for the schema to check.
 */
export function findUnsupported(doc: unknown, issues: IssueList): unknown {
  return walk(doc, CONFIG, [], issues);
}

function walk(v: unknown, shape: Shape, at: (string | number)[], issues: IssueList): unknown {
  if (shape === 'resource') return walkFields(v, RESOURCE_FIELDS, at, issues, true);
  if ('list' in shape) {
    // A wrong type is the schema's to report.
    return Array.isArray(v) ? v.map((item, i) => walk(item, shape.list, [...at, i], issues)) : v;
  }
  return walkFields(v, shape.obj, at, issues, false);
}

function walkFields(v: unknown, fields: Record<string, Shape | 'U' | 'leaf'>, at: (string | number)[], issues: IssueList, isResource: boolean): unknown {
  if (!isRecord(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(v)) {
    const sub = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (sub === undefined) {
      issues.warn('UNKNOWN_FIELD', fieldPath([...at, key]), 'not an Ignition v3 field: ignored, as Ignition ignores unknown keys');
    } else if (sub === leaf) {
      out[key] = value;
    } else if (isEmpty(value)) {
      continue;
    } else if (sub === U) {
      issues.add('SOURCE_UNSUPPORTED', fieldPath([...at, key]), 'an Ignition field stagedroot does not apply');
    } else {
      out[key] = walk(value, sub, [...at, key], issues);
    }
  }
  // A file's contents or append fragment: only data: URLs are read (nothing is fetched).
  if (isResource && typeof v.source === 'string') {
    const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(v.source)?.[1]?.toLowerCase();
    if (scheme !== undefined && scheme !== 'data') {
      issues.add('SOURCE_UNSUPPORTED', fieldPath([...at, 'source']), `a remote source (${scheme}:) is not supported: stagedroot fetches nothing, only data: URLs are applied`);
    }
  }
  return out;
}
