import { issuesError, type ErrorCode, type Issue } from '../../errors.js';

/**
 * Problems found in an Ignition config, collected (zod-style) rather than thrown at the
 * first, so one rejection lists every bad entry; warnings are collected beside them and
 * travel with the change set to the stage's result. Each error's `code` is the error
 * code it stands for; the thrown error takes the gravest of them.
 */
export class IssueList {
  readonly items: Issue[] = [];
  readonly warnings: Issue[] = [];

  add(code: ErrorCode, path: string, message: string): void {
    this.items.push({ code, path, message, severity: 'error' });
  }

  /** Something accepted, but worth saying (a stable code of its own, not an error code). */
  warn(code: string, path: string, message: string): void {
    this.warnings.push({ code, path, message, severity: 'warning' });
  }

  get length(): number {
    return this.items.length;
  }

  /** Throws when any error was collected: `what` says what was being checked. */
  throwIfAny(what: string): void {
    if (this.items.length === 0) return;
    throw issuesError(this.items, what);
  }
}
