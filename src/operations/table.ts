/**
 * Every lifecycle operation in one table: its name (the writer lock's, the intent's and
 * recovery's word for it), where its hooks run, for the operations that are one transition
 * of the pure model its plan, and its resume step (what completes or undoes it after a
 * crash). An operation runs as lock → every pending resume (the rows' resume steps, in the
 * table's order: RESUME_STEPS) → pre hooks → plan → apply → post hooks (run-operation.ts; a
 * pre hook runs before the plan reads anything: pre-stage before the source is read,
 * pre-finalize before the merge is planned); the operations that build trees (init, adopt,
 * stage, finalize, apply-live, the layer import) plan in their own folders (stage/init.ts,
 * install/adopt.ts's planAdoption, stage/stage-plan.ts, merge/plan.ts,
 * commit/apply-live.ts, stage/layer-stack.ts). Hooks run through runHooked (hooked.ts),
 * which runs only the points a row declares.
 */
import { recoverFinalize } from '../commit/finish.js';
import { recoverLive } from '../commit/recover-live.js';
import { restoreRollbackTrees } from '../commit/rollback-tree.js';
import type { HookPhase } from '../hooks/phases.js';
import { resumeLayerImport } from '../layer-store/resume-import.js';
import { upgradeSharedLayout } from '../persistent-dirs/upgrade.js';
import type { ResumeStep } from '../store/recover.js';
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
  /**
   * Its crash-recovery steps: each completes or undoes what a crash cut short of it, run by
   * every writer under the lock once the state and the pointer are settled, in the order
   * of the table's rows (recover.ts runs them; it never imports an operation).
   */
  resume?: readonly ResumeStep[];
  /** It runs inside another operation's apply, under that one's lock (it has no lock, intent or hooks of its own). */
  partOf?: string;
}

/**
 * Not an operation: a sysroot from before the shared directories is upgraded first of all,
 * so that every resume step (finalize's above all) finds them.
 */
export const LAYOUT_UPGRADE: ResumeStep = { operation: 'shared-directory layout upgrade', resume: upgradeSharedLayout };

/** The rows, in the order their resume steps run. */
export const OPERATIONS = {
  init: { hooks: {}, creates: true },
  adopt: { hooks: {}, creates: true },
  // A stage leaves only work/ID behind, which recovery removes with the other leftovers.
  stage: { hooks: { pre: 'pre-stage', post: 'post-stage', onFailure: true } },
  // Its plan is the finalize's merge of the update's own paths plus the live change set (commit/apply-live.ts). Resumed
  // before finalize: a merge redone into a staged deployment must read the running /etc as it was before the live apply.
  'apply-live': { hooks: { onFailure: true }, resume: [{ operation: 'apply-live', resume: recoverLive }] },
  finalize: { hooks: { pre: 'pre-finalize', post: 'post-finalize', onFailure: true }, resume: [{ operation: 'finalize', resume: recoverFinalize }] },
  // A stage's import of the layers its image adds to the layer store (stage/layer-stack.ts plans which; layer-store/import-layer.ts
  // applies one); its resume also removes what a release of unused layers (after a removal) left under the store's tmp/.
  'layer-import': { hooks: {}, partOf: 'stage', resume: [{ operation: 'layer import', resume: resumeLayerImport }] },
  // Its last step puts back the tree a live apply wrote into once it no longer runs (commit/rollback-tree.ts). Resumed after
  // apply-live's (a completed apply's journal is kept for that tree) and after finalize's (an interrupted carry of the /etc
  // edits into the live-applied deployment is completed from the tree as it runs, and then the tree no longer waits for it).
  boot: {
    hooks: { post: 'post-boot', onRollback: 'when-fell-back' },
    plan: (s: BaseState, i: { at: string; record: BootRecord | null }) => bootTransition(s, i.at, i.record),
    tries: 'write',
    resume: [{ operation: 'live-apply rollback tree', resume: restoreRollbackTrees }],
  },
  'mark-good': { hooks: {}, plan: (s: BaseState, i: { checks: number | null }) => markGoodTransition(s, i.checks) },
  'mark-bad': { hooks: { onRollback: 'always' }, plan: (s: BaseState, i: { failure: Failure }) => markBadTransition(s, i.failure) },
  rollback: { hooks: { onRollback: 'always' }, plan: (s: BaseState, i: { discardStaged?: boolean }) => rollbackTransition(s, i) },
  discard: { hooks: {}, plan: (s: BaseState) => discardTransition(s) },
  prune: { hooks: {}, plan: (s: BaseState, i: { keep: number }) => pruneTransition(s, i.keep) },
  pin: { hooks: {}, plan: (s: BaseState, i: { id: string; pinned: boolean }) => setPinned(s, i.id, i.pinned) },
  lock: { hooks: {}, plan: (s: BaseState) => setLocked(s, true) },
  unlock: { hooks: {}, plan: (s: BaseState) => setLocked(s, false) },
  trust: { hooks: {} },
  // `fleetlock configure`: SYSROOT/fleetlock.json, written whole (temp + rename); nothing to resume.
  fleetlock: { hooks: {} },
} as const satisfies Record<string, OperationSpec>;

export type OperationName = keyof typeof OPERATIONS;

/** Every pending resume, in the order recovery runs them: the layout upgrade, then each row's steps in the table's order. */
export const RESUME_STEPS: readonly ResumeStep[] = [LAYOUT_UPGRADE, ...Object.values(OPERATIONS as Record<string, OperationSpec>).flatMap((o) => o.resume ?? [])];
/** The operations that create a sysroot (they start from no state). */
export type CreatingOperation = { [N in OperationName]: (typeof OPERATIONS)[N] extends { creates: true } ? N : never }[OperationName];

/** The operations that run inside another's apply (no lock of their own). */
export type PartOperation = { [N in OperationName]: (typeof OPERATIONS)[N] extends { partOf: string } ? N : never }[OperationName];
/** The operations a writer runs under the lock, from the recovered state. */
export type WriterOperation = Exclude<OperationName, CreatingOperation | PartOperation>;

/** The operations that are one transition: their plan's input and outcome. */
type Planned = { [N in OperationName]: (typeof OPERATIONS)[N] extends { plan: (s: BaseState, i: infer I) => infer T } ? { input: unknown extends I ? Record<string, never> : I; outcome: T } : never };
export type PlannedOperation = { [N in OperationName]: Planned[N] extends never ? never : N }[OperationName];
export type PlanInput<N extends PlannedOperation> = Planned[N]['input'];
export type PlanOutcome<N extends PlannedOperation> = Planned[N]['outcome'];
