/**
 * src/rollback is a lifecycle step's folder, as src/stage and src/commit (the names users
 * were promised). Both ways back are one transition each in the pure model
 * (state/model.ts: rollbackTransition, markBadTransition), run by the operation table:
 * the manual rollback, and the one a failed boot assessment makes (mark-bad), whose
 * failure record is built here.
 */
import { mustFind } from '../state/model.js';
import type { BaseState, Failure, Phase } from '../state/schema.js';

/** The failure a failed boot assessment records on the booted deployment. */
export function bootedFailure(s: BaseState, reason: string, phase: Phase, at: string, output?: string): Failure {
  const booted = mustFind(s, s.booted ?? s.current);
  return { id: booted.id, label: booted.label, phase, reason, at, ...(output === undefined ? {} : { output }) };
}
