/**
 * The boot step (src/boot): the early-boot hook and the mark-good after health checks are
 * one transition each (state/model.ts: bootTransition, markGoodTransition; the operation
 * table runs them), beside what they read: the initramfs's record (boot-record.ts), the
 * sysroot's discovery (find-sysroot.ts) and the health checks (health.ts).
 */
import type { Context } from '../context.js';
import { readBootRecord, type BootRecordPlace } from './boot-record.js';
import type { BootEvent, BootRecord } from '../state/model.js';
import type { Failure } from '../state/schema.js';

export interface BootResult {
  event: BootEvent;
  /** A finalize failure from the last shutdown, reported once (the boot hook exits non-zero). */
  finalizeFailure: Failure | null;
  /** What the boot did besides recording it: the /etc edits of a live apply carried, a rollback tree's files restored. */
  actions: string[];
}

/**
 * The boot transition's input: the time and what the initramfs recorded, when it ran
 * (without the initramfs step the transition uses one try itself and falls back when
 * none are left).
 */
export function bootInput(ctx: Context, place: BootRecordPlace = {}): { at: string; record: BootRecord | null } {
  return { at: ctx.now().toISOString(), record: readBootRecord(ctx, place) };
}
