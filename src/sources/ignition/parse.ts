import { zodIssues } from '../spec.js';
import { IssueList, issuesError } from './issues.js';
import { ignitionSchema, SUPPORTED_VERSIONS, type IgnitionConfig } from './schema.js';
import { findUnsupported } from './unsupported.js';

/**
 * Checks an Ignition document in three passes, each listing every problem it finds:
 * the version (3.0.0–3.5.0), then fields stagedroot does not apply (SOURCE_UNSUPPORTED
 * with their paths), then the values of the supported ones (SPEC_INVALID, with a
 * PATH_ESCAPE issue for a ".." path). Nothing is read from disk here.
 */
export function parseIgnition(raw: unknown, describe: string): IgnitionConfig {
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

  const unsupported = new IssueList();
  const pruned = findUnsupported(doc, unsupported);
  unsupported.throwIfAny(`${what} uses fields stagedroot does not apply`);

  const r = ignitionSchema.safeParse(pruned);
  if (!r.success) {
    const issues = zodIssues(r.error).map((iss, n) => ({ ...iss, code: String((r.error.issues[n] as { params?: { code?: string } }).params?.code ?? 'SPEC_INVALID') }));
    throw issuesError(issues, `${what} is invalid`);
  }
  const cfg = r.data;
  const late = new IssueList();
  if (cfg.ignition.version === '3.0.0') {
    // sha256 verification arrived with spec 3.1.0; 3.0.0 knows only sha512.
    (cfg.storage?.files ?? []).forEach((f, i) => {
      [f.contents, ...(f.append ?? [])].forEach((res, j) => {
        if (res?.verification?.hash?.startsWith('sha256-')) {
          late.add('SPEC_INVALID', `storage.files[${i}].${j === 0 ? 'contents' : `append[${j - 1}]`}.verification.hash`, 'sha256 hashes need spec 3.1.0 or later');
        }
      });
    });
  }
  late.throwIfAny(`${what} is invalid`);
  return cfg;
}

/** JSON null means "unset" in Ignition (Go decodes it to a nil pointer): drop it from objects. */
function stripNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripNulls);
  if (typeof v !== 'object' || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = stripNulls(x);
  return out;
}
