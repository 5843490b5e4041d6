import { StagedrootError, type ErrorCode, type Issue } from '../../errors.js';

/**
 * Problems found in an Ignition config, collected (zod-style) rather than thrown at the
 * first, so one rejection lists every bad entry. Each issue's `code` is the error code
 * it stands for; the thrown error takes the gravest of them.
 */
export class IssueList {
  readonly items: Issue[] = [];

  add(code: ErrorCode, path: string, message: string): void {
    this.items.push({ code, path, message, severity: 'error' });
  }

  get length(): number {
    return this.items.length;
  }

  /** Throws when anything was collected: `what` says what was being checked. */
  throwIfAny(what: string): void {
    if (this.items.length === 0) return;
    throw issuesError(this.items, what);
  }
}

/** Graver first: a bomb outranks a corrupt source, which outranks a malformed field. */
const PRECEDENCE: ErrorCode[] = ['UNSAFE_ENTRY', 'PATH_ESCAPE', 'SOURCE_CORRUPT', 'SOURCE_UNSUPPORTED', 'SPEC_INVALID', 'APPLY_FAILED'];

export function issuesError(issues: Issue[], what: string): StagedrootError {
  const code = PRECEDENCE.find((c) => issues.some((i) => i.code === c)) ?? 'SPEC_INVALID';
  const n = issues.length;
  const lines = issues.map((i) => `  ${i.path || '(root)'}: ${i.message}`).join('\n');
  return new StagedrootError(code, `${what}: ${n} problem${n === 1 ? '' : 's'}:\n${lines}`, { issues, path: issues[0]?.path });
}

/** "storage.files[2].contents.source" from path segments. */
export function fieldPath(parts: readonly (string | number)[]): string {
  return parts.map((k, n) => (typeof k === 'number' ? `[${k}]` : n === 0 ? k : `.${k}`)).join('');
}
