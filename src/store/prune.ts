/**
 * Garbage collection: prune and discard are one transition each (state/model.ts) written
 * by the transition writer, so they live beside it and beside the removal of deployments
 * (remove-deployments.ts) rather than in a lifecycle folder of their own.
 */
import type { Context } from '../context.js';
import { applyTransition } from './apply-transition.js';
import { discardTransition, pruneTransition } from '../state/model.js';
import type { BaseState } from '../state/schema.js';

/** Removes deployments beyond the `keep` newest, never booted, current, staged, rollback, pinned or the last failure. */
export function prune(ctx: Context, s: BaseState, keep: number): { removed: string[] } {
  const t = pruneTransition(s, keep);
  applyTransition(ctx, s, t, 'prune');
  return { removed: t.drop };
}

/** Drops the staged deployment. */
export function discardStaged(ctx: Context, s: BaseState): { removed: string } {
  const t = discardTransition(s);
  applyTransition(ctx, s, t, 'discard');
  return { removed: t.drop[0]! };
}
