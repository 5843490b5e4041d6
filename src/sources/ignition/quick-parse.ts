import { MAX_PATH_DEPTH, splitSourcePath } from '../../fs/core/paths.js';
import { isRecord } from '../../util/is-record.js';
import { SUPPORTED_VERSIONS, type IgnitionConfig } from './schema.js';

/**
 * ignitionSchema's parse written out by hand for the common document (the version and
 * storage.files of plain entries: a path, overwrite, contents, a mode), as checkEntry is
 * for manifest lines: zod's parse of a config writing 200 files was ~35 ms of a stage's
 * plan. Returns what ignitionSchema.parse returns (a new object, the schema's keys in its
 * order, those the document has) only when zod would accept the document; null for any
 * other shape or value (other fields, owners, appends, an invalid value): zod then
 * decides and words the errors. The document is the one checkIgnition passes to the
 * schema (nulls stripped, unsupported fields refused).
 */
export function quickParse(doc: unknown): IgnitionConfig | null {
  if (!isRecord(doc) || !onlyKeys(doc, ROOT_KEYS)) return null;
  const ign = doc.ignition;
  if (!isRecord(ign) || !onlyKeys(ign, VERSION_KEYS) || !(SUPPORTED_VERSIONS as readonly unknown[]).includes(ign.version)) return null;
  const out: Record<string, unknown> = { ignition: { version: ign.version } };
  if ('storage' in doc) {
    const storage = doc.storage;
    if (!isRecord(storage) || !onlyKeys(storage, STORAGE_KEYS)) return null;
    const s: Record<string, unknown> = {};
    if ('files' in storage) {
      if (!Array.isArray(storage.files)) return null;
      const files: unknown[] = [];
      for (const f of storage.files) {
        const e = quickFile(f);
        if (e === null) return null;
        files.push(e);
      }
      s.files = files;
    }
    out.storage = s;
  }
  return out as IgnitionConfig;
}

const ROOT_KEYS = new Set(['ignition', 'storage']);
const VERSION_KEYS = new Set(['version']);
const STORAGE_KEYS = new Set(['files']);
const FILE_KEYS = new Set(['path', 'overwrite', 'contents', 'mode']);
const RESOURCE_KEYS = new Set(['source', 'compression', 'verification']);
const VERIFICATION_KEYS = new Set(['hash']);
const HASH_RE = /^(sha512-[0-9a-fA-F]{128}|sha256-[0-9a-fA-F]{64})$/;

function onlyKeys(o: Record<string, unknown>, keys: ReadonlySet<string>): boolean {
  for (const k in o) if (!keys.has(k) || o[k] === undefined) return false;
  return Object.getPrototypeOf(o) === Object.prototype;
}

/** A storage.files entry as fileSchema parses it, or null. */
function quickFile(f: unknown): Record<string, unknown> | null {
  if (!isRecord(f) || !onlyKeys(f, FILE_KEYS) || !quickPath(f.path)) return null;
  const e: Record<string, unknown> = { path: f.path };
  if ('overwrite' in f) {
    if (typeof f.overwrite !== 'boolean') return null;
    e.overwrite = f.overwrite;
  }
  if ('contents' in f) {
    const c = quickResource(f.contents);
    if (c === null) return null;
    e.contents = c;
  }
  if ('mode' in f) {
    const m = f.mode;
    if (typeof m !== 'number' || !Number.isInteger(m) || m < 0 || m > 0o7777) return null;
    e.mode = m;
  }
  // fileSchema's refinement: overwrite needs a source.
  if (f.overwrite === true && (e.contents as { source?: unknown } | undefined)?.source === undefined) return null;
  return e;
}

function quickResource(r: unknown): Record<string, unknown> | null {
  if (!isRecord(r) || !onlyKeys(r, RESOURCE_KEYS)) return null;
  const o: Record<string, unknown> = {};
  if ('source' in r) {
    if (typeof r.source !== 'string') return null;
    o.source = r.source;
  }
  if ('compression' in r) {
    if (r.compression !== '' && r.compression !== 'gzip') return null;
    o.compression = r.compression;
  }
  if ('verification' in r) {
    const v = r.verification;
    if (!isRecord(v) || !onlyKeys(v, VERIFICATION_KEYS)) return null;
    const w: Record<string, unknown> = {};
    if ('hash' in v) {
      if (typeof v.hash !== 'string' || !HASH_RE.test(v.hash)) return null;
      w.hash = v.hash;
    }
    o.verification = w;
  }
  return o;
}

/** pathSchema's checks: absolute, splitSourcePath accepts it, at most MAX_PATH_DEPTH deep. */
function quickPath(p: unknown): boolean {
  if (typeof p !== 'string' || !p.startsWith('/')) return false;
  try {
    return splitSourcePath(p).length <= MAX_PATH_DEPTH;
  } catch {
    return false;
  }
}
