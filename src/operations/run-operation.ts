import type { Context } from '../context.js';
import { acquireLock } from '../fs/lock/writer-lock.js';
import type { BaseState } from '../state/schema.js';
import { applyTransition } from '../store/apply-transition.js';
import { recover, type RecoveryReport } from '../store/recover.js';
import { emptyTrash } from '../store/remove-deployments.js';
import { RESUME_STEPS } from './resume-steps.js';
import { OPERATIONS, type OperationName, type PlannedOperation, type PlanInput, type PlanOutcome } from './table.js';

/** Recovery with every operation's resume step: what a writer runs first, under the lock. */
export function recoverAll(ctx: Context): RecoveryReport {
  return recover(ctx, RESUME_STEPS);
}

/**
 * An operation as every writer runs it: the sysroot's lock, recovery (every pending
 * resume), then `fn` (plan, hooks, apply) with the recovered state; deployments it
 * dropped to trash/ are deleted afterwards, off the event loop.
 */
export async function runOperation<T>(ctx: Context, operation: OperationName, waitSeconds: number, fn: (s: BaseState) => Promise<T> | T): Promise<T> {
  const lock = await acquireLock(ctx.layout.root, { waitSeconds, operation, faults: ctx.faults });
  try {
    const { state } = recoverAll(ctx);
    try {
      return await fn(state);
    } finally {
      await emptyTrash(ctx).catch((err: unknown) => ctx.warn(`could not empty trash/ (${(err as Error).message}); the next writer retries`));
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
