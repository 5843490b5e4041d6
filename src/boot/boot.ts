/**
 * The boot step (src/boot): this hook and the mark-good after health checks, one
 * transition each (state/model.ts), beside what they read: the initramfs's record
 * (boot-record.ts), the sysroot's discovery (find-sysroot.ts) and the health checks
 * (health.ts).
 */
import type { Context } from '../context.js';
import { applyTransition } from '../store/apply-transition.js';
import { readBootRecord, type BootRecordPlace } from './boot-record.js';
import { bootTransition, markGoodTransition, type BootEvent } from '../state/model.js';
import type { BaseState, Failure } from '../state/schema.js';

export interface BootResult {
  event: BootEvent;
  /** A finalize failure from the last shutdown, reported once (the boot hook exits non-zero). */
  finalizeFailure: Failure | null;
}

/**
 * The early-boot hook: records the booted deployment (what the initramfs recorded, when
 * it ran), its tries, and a fallback the initramfs made; without the initramfs step it
 * uses one try itself and falls back when none are left.
 */
export function boot(ctx: Context, s: BaseState, place: BootRecordPlace = {}): BootResult {
  const t = bootTransition(s, ctx.now().toISOString(), readBootRecord(ctx, place));
  applyTransition(ctx, s, t, 'boot', { tries: 'write' });
  return { event: t.event, finalizeFailure: t.finalizeFailure };
}

/** Health checks passed: the booted deployment is good and its tries are cleared. */
export function markGood(ctx: Context, s: BaseState, checks: number | null = null): BaseState {
  return applyTransition(ctx, s, markGoodTransition(s, checks), 'mark-good');
}
