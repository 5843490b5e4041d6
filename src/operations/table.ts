/**
 * Every lifecycle operation in one table: its name (the writer lock's, the intent's and
 * recovery's word for it), where its hooks run, and, for the operations that are one
 * transition of the pure model, its plan. An operation runs as lock → every pending
 * resume (RESUME_STEPS) → plan → pre hooks → apply → post hooks (run-operation.ts); the
 * operations that build trees (init, adopt, stage, finalize) plan in their own folders
 * (stage/stage-plan.ts, merge/plan.ts). Hooks run through runHooked (hooked.ts), which
 * runs only the points a row declares.
 */
import type { HookPhase } from '../hooks/phases.js';
import { bootTransition, discardTransition, markBadTransition, markGoodTransition, pruneTransition, rollbackTransition, setLocked, setPinned, type BootRecord } from '../state/model.js';
import type { BaseState, Failure } from '../state/schema.js';

export interface OperationHooks {
  /** Runs before the operation writes anything; the first hook that fails stops it. */
  pre?: Extract<HookPhase, `pre-${string}`>;
  /** Runs after it succeeded; a failing hook is a warning. */
  post?: Extract<HookPhase, `post-${string}`>;
  /** on-failure runs when the operation failed in a way it recorded. */
  onFailure?: true;
  /** on-rollback runs after it: always (it sends the next boot back), or when the boot fell back. */
  onRollback?: 'always' | 'when-fell-back';
}

export interface OperationSpec {
  hooks: OperationHooks;
  /** The pure transition it is, from the state and its input (none: it builds trees, its plan is its folder's). */
  plan?: (s: BaseState, input: never) => unknown;
  /** The boot hook writes the tries file from the state; the others keep it. */
  tries?: 'write';
  /**
   * It creates the sysroot: there is no state yet, so nothing to recover (a crash before its
   * state file was written leaves leftovers that it clears itself, under the lock).
   */
  creates?: true;
}

export const OPERATIONS = {
  init: { hooks: {}, creates: true },
  adopt: { hooks: {}, creates: true },
  stage: { hooks: { pre: 'pre-stage', post: 'post-stage', onFailure: true } },
  finalize: { hooks: { pre: 'pre-finalize', post: 'post-finalize', onFailure: true } },
  // Its plan is the finalize's merge plus the live change set (commit/apply-live.ts); its resume, commit/recover-live.ts.
  'apply-live': { hooks: { onFailure: true } },
  boot: { hooks: { post: 'post-boot', onRollback: 'when-fell-back' }, plan: (s: BaseState, i: { at: string; record: BootRecord | null }) => bootTransition(s, i.at, i.record), tries: 'write' },
  'mark-good': { hooks: {}, plan: (s: BaseState, i: { checks: number | null }) => markGoodTransition(s, i.checks) },
  'mark-bad': { hooks: { onRollback: 'always' }, plan: (s: BaseState, i: { failure: Failure }) => markBadTransition(s, i.failure) },
  rollback: { hooks: { onRollback: 'always' }, plan: (s: BaseState, i: { discardStaged?: boolean }) => rollbackTransition(s, i) },
  discard: { hooks: {}, plan: (s: BaseState) => discardTransition(s) },
  prune: { hooks: {}, plan: (s: BaseState, i: { keep: number }) => pruneTransition(s, i.keep) },
  pin: { hooks: {}, plan: (s: BaseState, i: { id: string; pinned: boolean }) => setPinned(s, i.id, i.pinned) },
  lock: { hooks: {}, plan: (s: BaseState) => setLocked(s, true) },
  unlock: { hooks: {}, plan: (s: BaseState) => setLocked(s, false) },
  trust: { hooks: {} },
} as const satisfies Record<string, OperationSpec>;

export type OperationName = keyof typeof OPERATIONS;
/** The operations that create a sysroot (they start from no state). */
export type CreatingOperation = { [N in OperationName]: (typeof OPERATIONS)[N] extends { creates: true } ? N : never }[OperationName];

/** The operations that are one transition: their plan's input and outcome. */
type Planned = { [N in OperationName]: (typeof OPERATIONS)[N] extends { plan: (s: BaseState, i: infer I) => infer T } ? { input: unknown extends I ? Record<string, never> : I; outcome: T } : never };
export type PlannedOperation = { [N in OperationName]: Planned[N] extends never ? never : N }[OperationName];
export type PlanInput<N extends PlannedOperation> = Planned[N]['input'];
export type PlanOutcome<N extends PlannedOperation> = Planned[N]['outcome'];
