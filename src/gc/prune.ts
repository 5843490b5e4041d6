import type { Context } from '../context.js';
import { applyTransition } from '../store/apply-transition.js';
import { discardTransition, pruneTransition } from '../state/model.js';
import type { BaseState } from '../state/schema.js';

/** Removes deployments beyond the `keep` newest, never booted, current, staged, rollback, pinned or the last failure. */
export function prune(ctx: Context, s: BaseState, keep: number): { state: BaseState; removed: string[] } {
  const t = pruneTransition(s, keep);
  return { state: applyTransition(ctx, s, t, 'prune'), removed: t.drop };
}

/** Drops the staged deployment. */
export function discardStaged(ctx: Context, s: BaseState): { state: BaseState; removed: string } {
  const t = discardTransition(s);
  return { state: applyTransition(ctx, s, t, 'discard'), removed: t.drop[0]! };
}
