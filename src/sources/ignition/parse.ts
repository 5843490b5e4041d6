import { issuesError, type Issue } from '../../errors.js';
import { zodIssues } from '../document.js';
import { IssueList } from './issues.js';
import { ignitionSchema, SUPPORTED_VERSIONS, type IgnitionConfig } from './schema.js';
import { findUnsupported } from './unsupported.js';
import { quickParse } from './quick-parse.js';

export interface CheckedIgnition {
  config: IgnitionConfig;
  /** What was accepted but is worth saying: unknown keys ignored, mode bits the version drops. */
  warnings: Issue[];
}

/** Set-uid, set-gid and sticky: honoured in `mode` from spec 3.6.0 on. */
const SPECIAL_MODE_BITS = 0o7000;

/**
 * Checks an Ignition document in three passes, each listing every problem it finds:
 * the version (3.0.0–3.6.0), then fields stagedroot does not apply (SOURCE_UNSUPPORTED
 * with their paths; unknown keys are warnings), then the values of the supported ones
 * (SPEC_INVALID, with a PATH_ESCAPE issue for a ".." path). Nothing is read from disk here.
 */
export function checkIgnition(raw: unknown, describe: string): CheckedIgnition {
  const doc = stripNulls(raw);
  const what = `The Ignition config ${describe}`;
  const version = (doc as { ignition?: { version?: unknown } } | null)?.ignition?.version;
  if (typeof version !== 'string') {
    throw issuesError([{ code: 'SPEC_INVALID', path: 'ignition.version', message: 'required: a string such as "3.2.0"', severity: 'error' }], `${what} is invalid`);
  }
  if (!(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
    const why = /^\d+\.\d+\.\d+(-experimental)?$/.test(version) ? 'SOURCE_UNSUPPORTED' : 'SPEC_INVALID';
    throw issuesError([{ code: why, path: 'ignition.version', message: `version ${JSON.stringify(version)} is not one stagedroot reads (${SUPPORTED_VERSIONS.join(', ')})`, severity: 'error' }], `${what} is not supported`);
  }

  const found = new IssueList();
  const pruned = findUnsupported(doc, found);
  found.throwIfAny(`${what} uses fields stagedroot does not apply`);

  // The common document without zod (quickParse: the same result, or null and zod decides).
  let cfg = quickParse(pruned);
  if (cfg === null) {
    const r = ignitionSchema.safeParse(pruned);
    if (!r.success) throw issuesError(zodIssues(r.error), `${what} is invalid`);
    cfg = r.data;
  }
  if (cfg.ignition.version === '3.0.0') {
    // sha256 verification arrived with spec 3.1.0; 3.0.0 knows only sha512.
    (cfg.storage?.files ?? []).forEach((f, i) => {
      [f.contents, ...(f.append ?? [])].forEach((res, j) => {
        if (res?.verification?.hash?.startsWith('sha256-')) {
          found.add('SPEC_INVALID', `storage.files[${i}].${j === 0 ? 'contents' : `append[${j - 1}]`}.verification.hash`, 'sha256 hashes need spec 3.1.0 or later');
        }
      });
    });
  }
  found.throwIfAny(`${what} is invalid`);
  if (Number(cfg.ignition.version.split('.')[1]) < 6) dropSpecialModeBits(cfg, found);
  return { config: cfg, warnings: found.warnings };
}

/** The checked config alone (warnings dropped): for callers that only read configs. */
export function parseIgnition(raw: unknown, describe: string): IgnitionConfig {
  return checkIgnition(raw, describe).config;
}

/**
 * Before spec 3.6.0, Ignition ignores the set-uid, set-gid and sticky bits of `mode`
 * (it masks them when translating the config up, and warns): so does stagedroot, with
 * a warning naming the field. From 3.6.0 on they are applied, and the staged tree's
 * set-uid check judges the result.
 */
function dropSpecialModeBits(cfg: IgnitionConfig, found: IssueList): void {
  const entries = [['files', cfg.storage?.files], ['directories', cfg.storage?.directories]] as const;
  for (const [kind, list] of entries) {
    (list ?? []).forEach((e, i) => {
      if (e.mode === undefined || (e.mode & SPECIAL_MODE_BITS) === 0) return;
      const kept = e.mode & ~SPECIAL_MODE_BITS;
      found.warn('MODE_BITS_IGNORED', `storage.${kind}[${i}].mode`, `setuid/setgid/sticky bits are not applied before spec 3.6.0 (this config is ${cfg.ignition.version}): mode ${octal(e.mode)} is applied as ${octal(kept)}`);
      e.mode = kept;
    });
  }
}

const octal = (m: number): string => '0' + m.toString(8).padStart(3, '0');

/** JSON null means "unset" in Ignition (Go decodes it to a nil pointer): drop it from objects. */
function stripNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripNulls);
  if (typeof v !== 'object' || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = stripNulls(x);
  return out;
}
