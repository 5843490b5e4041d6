/**
 * src/rollback is a lifecycle step's folder, as src/stage and src/commit (the names users
 * were promised). Both ways back are one transition each in the pure model
 * (state/model.ts: rollbackTransition, markBadTransition), written by the transition
 * writer: the manual rollback, and the one a failed boot assessment makes (markBad).
 */
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
