import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { acquireLock } from '../fs/lock/writer-lock.js';
import type { BaseState } from '../state/schema.js';
import { applyTransition } from '../store/apply-transition.js';
import { recover, type RecoveryReport } from '../store/recover.js';
import { emptyTrash } from '../store/remove-deployments.js';
import { OPERATIONS, RESUME_STEPS, type CreatingOperation, type OperationName, type PartOperation, type PlannedOperation, type PlanInput, type PlanOutcome } from './table.js';

/** Recovery with every operation's resume step: what a writer runs first, under the lock. */
export function recoverAll(ctx: Context): RecoveryReport {
  return recover(ctx, RESUME_STEPS);
}

/**
 * Recovery alone, as opening a sysroot runs it: when the lock is free at once. A busy
 * sysroot is left to the writer that holds it, which recovers first; null then.
 */
export async function recoverIfFree(ctx: Context): Promise<RecoveryReport['actions'] | null> {
  let lock;
  try {
    lock = await acquireLock(ctx.layout.root, { waitSeconds: 0, operation: 'open', faults: ctx.faults });
  } catch (err) {
    if (err instanceof StagedrootError && err.code === 'BUSY') return null;
    throw err;
  }
  try {
    return recoverAll(ctx).actions;
  } finally {
    lock.release();
  }
}

/** What an operation starts from: the recovered state, or none for one that creates the sysroot. */
type StateBefore<N extends OperationName> = N extends CreatingOperation ? null : BaseState;

/**
 * An operation as every writer runs it: the sysroot's lock, recovery (every pending
 * resume), then `fn` (plan, hooks, apply) with the recovered state; deployments it
 * dropped to trash/ are deleted afterwards, off the event loop. An operation that creates
 * the sysroot (`creates` in the table) makes its directory first, for the lock, and runs
 * `fn` with no state: there is nothing to recover or empty yet.
 */
export async function runOperation<N extends Exclude<OperationName, PartOperation>, T>(ctx: Context, operation: N, waitSeconds: number, fn: (s: StateBefore<N>) => Promise<T> | T): Promise<T> {
  const creates = 'creates' in OPERATIONS[operation];
  if (creates) ctx.dfs.mkdir(ctx.layout.root);
  const lock = await acquireLock(ctx.layout.root, { waitSeconds, operation, faults: ctx.faults });
  try {
    if (creates) return await fn(null as StateBefore<N>);
    const { state } = recoverAll(ctx);
    try {
      return await fn(state as StateBefore<N>);
    } finally {
      const removed = await emptyTrash(ctx).catch((err: unknown) => (ctx.warn(`could not empty trash/ (${(err as Error).message}); the next writer retries`), 0));
      // The layers only the removed deployments used go too (loaded then: most operations remove nothing).
      if (removed > 0) await import('../layer-store/release-unused.js').then((m) => m.releaseUnusedLayers(ctx)).catch((err: unknown) => ctx.warn(`could not release unused layers (${(err as Error).message}); the next removal retries`));
    }
  } finally {
    lock.release();
  }
}

/** A one-transition operation: its plan (pure, from the state and its input), then the transition writer. */
export function applyPlan<N extends PlannedOperation>(ctx: Context, s: BaseState, name: N, input: PlanInput<N>): { outcome: PlanOutcome<N>; state: BaseState } {
  const spec = OPERATIONS[name] as { plan: (s: BaseState, i: PlanInput<N>) => PlanOutcome<N>; tries?: 'write' };
  const outcome = spec.plan(s, input);
  const state = applyTransition(ctx, s, outcome as Parameters<typeof applyTransition>[2], name, { tries: spec.tries ?? 'keep' });
  return { outcome, state };
}
