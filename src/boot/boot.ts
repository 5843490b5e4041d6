import type { Context } from '../context.js';
import { applyTransition } from '../store/apply-transition.js';
import { bootTransition, markGoodTransition, type BootEvent } from '../state/model.js';
import type { BaseState, Failure } from '../state/schema.js';

export interface BootResult {
  event: BootEvent;
  /** A finalize failure from the last shutdown, reported once (the boot hook exits non-zero). */
  finalizeFailure: Failure | null;
}

/** The early-boot hook: records the booted deployment, uses one try, falls back when none are left. */
export function boot(ctx: Context, s: BaseState): BootResult {
  const t = bootTransition(s, ctx.now().toISOString());
  applyTransition(ctx, s, t, 'boot');
  return { event: t.event, finalizeFailure: t.finalizeFailure };
}

/** Health checks passed: the booted deployment is good and its tries are cleared. */
export function markGood(ctx: Context, s: BaseState): BaseState {
  return applyTransition(ctx, s, markGoodTransition(s), 'mark-good');
}
