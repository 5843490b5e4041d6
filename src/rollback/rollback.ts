import type { Context } from '../context.js';
import { applyTransition } from '../store/apply-transition.js';
import { markBadTransition, mustFind, rollbackTransition } from '../state/model.js';
import type { BaseState, Phase } from '../state/schema.js';

/** Manual rollback: the rollback deployment becomes current at the next boot. */
export function rollback(ctx: Context, s: BaseState, opts: { discardStaged?: boolean } = {}): BaseState {
  return applyTransition(ctx, s, rollbackTransition(s, opts), 'rollback');
}

/** Boot assessment failed: the booted deployment is marked bad; current goes back to the last good one. */
export function markBad(ctx: Context, s: BaseState, reason: string, phase: Phase = 'health', output?: string): BaseState {
  const booted = mustFind(s, s.booted ?? s.current);
  const failure = { id: booted.id, label: booted.label, phase, reason, at: ctx.now().toISOString(), ...(output === undefined ? {} : { output }) };
  return applyTransition(ctx, s, markBadTransition(s, failure), 'mark-bad');
}
