import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { exists, readText } from '../fs/core/host-paths.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { manifestTasks } from '../fs/manifests/tasks.js';
import { parseDelta, verifyDelta } from '../fs/manifests/delta.js';
import { finalizeFailed, finalizeTransition, liveEtcOf, mustFind, type Transition } from '../state/model.js';
import type { BaseState, MergeReport } from '../state/schema.js';
import { applyTransition } from '../store/apply-transition.js';
import { applyEtcMerge, conflictIssue, keepLocalVersions, planEtcMerge, planLiveMerge, type PlannedMerge } from '../merge/merge.js';
import type { TypeConflict } from '../merge/plan.js';
import { keepSharedVersions, planShared, type SharedPlan } from '../persistent-dirs/apply.js';
import { mergedDirs, sharedDirs } from '../persistent-dirs/config.js';
import { carryLiveEdits } from './carry-live.js';
import { finishFinalize } from './finish.js';

export interface FinalizeOptions {
  /** Verify the whole staged tree, not only the manifest and the update's delta. */
  fullVerify?: boolean;
}

/** How prepareFinalize plans the /etc merge: `live` (apply-live) from the update's own paths only (planLiveMerge), the other local edits left to the carry. */
export interface PrepareOptions extends FinalizeOptions {
  merge?: 'whole' | 'live';
}

export type FinalizeResult =
  | { finalized: true; id: string; previous: string; merge: MergeReport }
  | { finalized: false; reason: 'nothing-staged' | 'locked'; id?: string };

/**
 * The shutdown hook: the staged deployment becomes current by one atomic symlink swap.
 * Before trusting it, what the update changed (its delta) is checked against the tree:
 * O(change), so shutdown stays fast however large the tree (`fullVerify` checks the
 * manifest's checksum and the whole tree);
 * a mismatch is recorded durably as a finalize failure, and current stays as it was.
 * The /etc merge's tree-sized part (the walk of the live etc/) runs on a worker thread:
 * the caller's event loop keeps turning. Its result is recorded as the manifest's
 * overlay (O(changes in /etc)), not by rewriting the manifest.
 */
export async function finalize(ctx: Context, s: BaseState, o: FinalizeOptions = {}): Promise<FinalizeResult> {
  // Nothing to make current: the edits made since a live apply still go into the deployment it made current.
  if (s.staged === null) {
    await carryLiveEdits(ctx, s, 'finalize');
    return { finalized: false, reason: 'nothing-staged' };
  }
  const staged = mustFind(s, s.staged);
  if (staged.locked) {
    await carryLiveEdits(ctx, s, 'finalize');
    return { finalized: false, reason: 'locked', id: staged.id };
  }
  const prepared = await prepareFinalize(ctx, s, o);
  commitFinalize(ctx, prepared, finalizeTransition);
  return { finalized: true, id: staged.id, previous: s.current, merge: prepared.report };
}

/** A finalize planned and merged into the staged tree, its swap not yet made (see commitFinalize). */
export interface PreparedFinalize {
  /** The state before, and with the staged deployment's merged manifest digest. */
  before: BaseState;
  merged: BaseState;
  id: string;
  report: MergeReport;
}

/**
 * The part of a finalize before its commit point: the staged tree is checked against what
 * the update changed, the /etc merge and the update's entries under shared directories
 * are planned (a type conflict is recorded as a failure under `phase`, nothing written),
 * the local versions the update wins over are kept, and the merge is written into the
 * staged tree. What is running is not touched. apply-live runs its own writes between
 * this and the swap.
 */
export async function prepareFinalize(ctx: Context, s: BaseState, o: PrepareOptions = {}): Promise<PreparedFinalize> {
  const staged = mustFind(s, s.staged!);
  const fail = (problem: string, issues: TypeConflict[] = []): never => {
    const failure = {
      id: staged.id,
      label: staged.label,
      phase: 'finalize' as const,
      reason: problem,
      at: ctx.now().toISOString(),
      code: 'FINALIZE_FAILED',
      ...(issues.length ? { path: issues[0]!.path, issues: issues.map(conflictIssue) } : {}),
    };
    applyTransition(ctx, s, finalizeFailed(s, failure), 'finalize-failed');
    throw new StagedrootError('FINALIZE_FAILED', `Finalize of deployment ${staged.id} (${staged.label}) failed: ${problem}; current stays ${s.current}`, { value: staged.id, path: failure.path, issues: failure.issues });
  };
  const problem = await checkStaged(ctx, staged.id, staged.manifestSha256, o.fullVerify ?? false);
  if (problem !== null) fail(problem);

  // Plan first (nothing written): the /etc merge and the update's entries under shared directories.
  const merge = await mergeBase(ctx, s, staged.id, staged.parent, o.merge ?? 'whole');
  const shared = planShared(ctx.layout, staged.id, sharedDirs(s));
  const conflicts = [...(merge?.typeConflicts ?? []), ...shared.typeConflicts];
  if (conflicts.length > 0) {
    fail(`${conflicts.length} merge conflict${conflicts.length === 1 ? '' : 's'} that cannot be resolved (a directory on one side, a non-directory on the other): ${conflicts.map((c) => `${c.path} (local ${c.local}, update ${c.update})`).join(', ')}; nothing was changed`, conflicts);
  }

  // Kept copies (outside every tree), then the merge into the staged tree.
  if (merge) keepLocalVersions(ctx, merge);
  keepSharedVersions(ctx, staged.id, shared, sharedDirs(s));
  // A plan with no action leaves the staged tree and its manifest as they are: no marker, no overlay written.
  const sha = merge && merge.actions.length > 0 ? applyEtcMerge(ctx, merge, mergedDirs(s), staged.manifestSha256) : staged.manifestSha256;
  const report = mergeReport(ctx, staged.id, merge, shared);
  const merged: BaseState = { ...s, deployments: s.deployments.map((d) => (d.id === staged.id ? { ...d, manifestSha256: sha } : d)) };
  return { before: s, merged, id: staged.id, report };
}

/**
 * The commit point of a finalize: the staged deployment becomes current by `transition`
 * (finalizeTransition, or apply-live's, which records how it got there) in one atomic
 * swap, the merge's marker goes, and the last steps run (finishFinalize). Returns the new state.
 */
export function commitFinalize(ctx: Context, p: PreparedFinalize, transition: (s: BaseState) => Transition, op = 'finalize'): BaseState {
  const t = transition(p.merged);
  // Right after the swap, the one state written after it is finishFinalize's (applyTransition's `finish`).
  const finish = (next: BaseState): BaseState => {
    ctx.dfs.unlink(ctx.layout.mergeMarker(p.id));
    return finishFinalize(ctx, next);
  };
  return applyTransition(ctx, p.before, { next: { ...t.next, lastMerge: p.report, finishPending: p.id }, drop: t.drop }, op, { finish });
}

/**
 * The merge plan, when the staged deployment was built from the one whose etc/ the running
 * root holds (the booted one, or the one a live apply made current in it); else its etc/
 * is not the running system's. `live`: the plan of the update's own paths (planLiveMerge).
 */
async function mergeBase(ctx: Context, s: BaseState, staged: string, parent: string | null, scope: 'whole' | 'live'): Promise<PlannedMerge | null> {
  const base = liveEtcOf(s);
  if (base === null || s.booted === null) return null;
  if (parent !== base) {
    ctx.warn(`deployment ${staged} was built from ${parent ?? 'nothing'}, not from the running ${base}: local changes in ${mergedDirs(s).join(', ')} are not merged into it`);
    return null;
  }
  if (scope === 'live') return planLiveMerge(ctx.layout, base, staged, mergedDirs(s), s.booted);
  return planEtcMerge(ctx.layout, base, staged, mergedDirs(s), { running: s.booted });
}

function mergeReport(ctx: Context, id: string, merge: PlannedMerge | null, shared: SharedPlan): MergeReport {
  const kept = (p: string): string => `kept/${id}/${p}`;
  return {
    id,
    at: ctx.now().toISOString(),
    carried: merge?.carried ?? 0,
    conflicts: [...(merge?.conflicts ?? []).map((c) => ({ path: c.path, kept: c.kept ? kept(c.path) : null })), ...shared.keep.map((k) => ({ path: k.path, kept: kept(k.path) }))],
  };
}

/** Why the staged tree cannot be trusted, or null. The full check (a whole-tree walk) runs on a worker thread. */
async function checkStaged(ctx: Context, id: string, manifestSha256: string | null, full: boolean): Promise<string | null> {
  const { layout } = ctx;
  if (!exists(layout.tree(id))) return `its tree ${layout.tree(id)} is missing`;
  if (!exists(layout.manifest(id))) return `its manifest ${layout.manifest(id)} is missing`;
  let drift;
  if (full) {
    if (manifestSha256 !== null && (await runTreeTask(manifestTasks.manifestDigest, { file: layout.manifest(id) })) !== manifestSha256) return `its manifest ${layout.manifest(id)} was modified after staging`;
    drift = await runTreeTask(manifestTasks.verifyTree, { tree: layout.tree(id), manifest: layout.manifest(id) });
  } else {
    const text = readText(layout.delta(id));
    if (text === null) return `its delta ${layout.delta(id)} is missing`;
    try {
      drift = verifyDelta(layout.tree(id), parseDelta(text, layout.delta(id)));
    } catch (err) {
      return (err as Error).message;
    }
  }
  if (drift.length === 0) return null;
  const shown = drift.slice(0, 5).map((d) => `${d.path} (${d.kind})`).join(', ');
  return `the staged tree no longer matches its manifest: ${shown}${drift.length > 5 ? ` and ${drift.length - 5} more` : ''}`;
}
