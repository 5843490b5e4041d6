import type { Context } from '../context.js';
import type { HookContext, HookRun } from '../hooks/run-hooks.js';
import { requirePhaseHooks, runPhaseHooks, type HookTimeout } from './phase-hooks.js';
import { OPERATIONS, type OperationHooks, type OperationName } from './table.js';

/** What a hook point is told: the deployment it is about (the sysroot is added). */
export type HookAbout = Omit<HookContext, 'sysroot'>;

/**
 * What an operation says at each of its hook points. A point runs only when the
 * operation's row in OPERATIONS has it, so the table is the one place that says which
 * hooks an operation runs; the operation says only what each is about (null: nothing
 * to run it for — nothing staged, a bad option rather than the update failing, nothing done).
 */
export interface HookPoints<T> {
  /** pre-*: what it is about, and how a failing hook stops the operation. */
  pre?: { about: HookAbout; stop: Parameters<typeof requirePhaseHooks>[3] } | null;
  /** on-failure: what the failed operation was about, for a failure it recorded. */
  failed?: (err: unknown) => HookAbout | null;
  /** on-rollback: the deployment the next boot goes back to, when the operation sent it there. */
  rolledBack?: (r: T) => HookAbout | null;
  /** post-*: what the operation did. */
  done?: (r: T) => HookAbout | null;
}

/**
 * Runs `apply` between its operation's hooks (inside the writer lock, after recovery):
 * pre (the first failing hook stops it, nothing written), then apply; on an error,
 * on-failure; on success, on-rollback then post. Returns apply's result and the post
 * hooks' runs.
 */
export async function runHooked<T>(ctx: Context, op: OperationName, points: HookPoints<T>, o: HookTimeout, apply: () => Promise<T>): Promise<{ result: T; post: HookRun[] }> {
  const h: OperationHooks = OPERATIONS[op].hooks;
  if (h.pre !== undefined && points.pre) await requirePhaseHooks(ctx, h.pre, points.pre.about, points.pre.stop, o);
  let result: T;
  try {
    result = await apply();
  } catch (err) {
    const about = h.onFailure ? (points.failed?.(err) ?? null) : null;
    if (about !== null) await runPhaseHooks(ctx, 'on-failure', about, o);
    throw err;
  }
  const back = h.onRollback !== undefined ? (points.rolledBack?.(result) ?? null) : null;
  if (back !== null) await runPhaseHooks(ctx, 'on-rollback', back, o);
  const done = h.post !== undefined ? (points.done?.(result) ?? null) : null;
  return { result, post: done !== null && h.post !== undefined ? await runPhaseHooks(ctx, h.post, done, o) : [] };
}

/** The runner of an operation's pre phase, for an operation that runs it inside its own plan (stage: its failure is the stage's). */
export function preHooksOf(ctx: Context, op: OperationName, o: HookTimeout): ((about: HookAbout) => Promise<HookRun[]>) | null {
  const pre = (OPERATIONS[op].hooks as OperationHooks).pre;
  return pre === undefined ? null : (about) => runPhaseHooks(ctx, pre, about, o);
}
