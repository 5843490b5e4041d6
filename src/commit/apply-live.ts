import { HOST_SYSTEMCTL, actionText, currentBootId, systemctlArgs, undoSteps, type ServiceManager } from '../activation/live/actions.js';
import { ActionRunner, type ActionResult } from '../activation/live/run-actions.js';
import { markProgress, type LiveJournal } from '../activation/live/journal.js';
import { prepareJournal, type LiveChange } from '../activation/live/prepare.js';
import { restoreEntries, writeEntries } from '../activation/live/write-entries.js';
import { runHealthChecks, type HealthOptions } from '../boot/health.js';
import type { Context } from '../context.js';
import type { Activation } from '../state/activation.js';
import { StagedrootError } from '../errors.js';
import { hostPath } from '../fs/core/names.js';
import { isUnder } from '../fs/core/paths.js';
import { readEntry } from '../fs/manifests/manifest.js';
import { ManifestIndex } from '../fs/manifests/manifest-index.js';
import { sameEntry } from '../fs/manifests/same-entry.js';
import { lstatOrNull } from '../fs/trees/copy-entry.js';
import { updatePaths } from '../merge/merge.js';
import { sharedDirs } from '../persistent-dirs/config.js';
import type { PolicyAction } from '../state/activation.js';
import { applyLiveTransition, discardTransition, liveEtcOf, mustFind } from '../state/model.js';
import type { BaseState, Failure, MergeReport } from '../state/schema.js';
import { applyTransition } from '../store/apply-transition.js';
import { commitFinalize, prepareFinalize } from './finalize.js';
import { keepForRollback } from './rollback-tree.js';

export interface ApplyLiveOptions {
  /** A MachineConfiguration (YAML or JSON) whose node disruption policies decide again, merged over the MCO defaults (default: the decision recorded at stage). */
  disruptionPolicy?: string;
  /** Who runs the actions (default: the host's systemd, over its private socket, or its systemctl). */
  services?: ServiceManager;
  /** On failure, discard the staged deployment instead of leaving it staged for a reboot. */
  discardOnFailure?: boolean;
  /** Health checks run after the actions (the same as `stagedroot health`): a required one failing undoes the apply like a failed action. */
  health?: HealthOptions;
  /** Progress: each step as it starts. */
  onStep?: (step: string) => void;
}

export interface ApplyLiveResult {
  id: string;
  /** The deployment that was running and still runs (its tree has the new files). */
  running: string;
  /** Paths written or removed in the running root. */
  paths: string[];
  actions: PolicyAction[];
  merge: MergeReport;
}

/**
 * A path of the delta is written live unless it is under a shared directory (never in a
 * tree) or under usr/ outside usr/local (the decision made that a reboot): the decision
 * allowed every other one, an SSH key in root/ or home/ as much as a file under etc/.
 */
const liveScope = (shared: readonly string[], p: string): boolean => !shared.some((d) => isUnder(p, d)) && (!isUnder(p, 'usr') || isUnder(p, 'usr/local'));

/**
 * What the live apply writes into the running root: every path the update decided (its
 * delta) whose entry in the merged staged tree differs from the running one (the merge of
 * the update's own paths ran first), so only the update's own changes are written.
 */
function liveChanges(ctx: Context, staged: string, running: string, shared: readonly string[]): LiveChange[] {
  const u = updatePaths(ctx.layout, staged);
  // The staged side is in its manifest (the merge's overlay included): only the running tree is read.
  const want = new ManifestIndex(ctx.layout.manifest(staged));
  const runningTree = ctx.layout.tree(running);
  const out: LiveChange[] = [];
  try {
    for (const p of [...u.changed.keys(), ...u.removed]) {
      if (!liveScope(shared, p)) continue;
      const w = want.find(p);
      const h = hostPath(runningTree, p);
      const st = lstatOrNull(h);
      if (sameEntry(w, st === null ? null : readEntry(p, h, st))) continue;
      out.push({ path: p, change: w === null ? 'remove' : 'write' });
    }
  } finally {
    want.close();
  }
  return out;
}

class ActionFailed extends Error {
  constructor(
    readonly what: string,
    readonly result: Pick<ActionResult, 'exitCode' | 'output'>,
  ) {
    super(`${what} failed${result.exitCode === null ? '' : ` (exit ${result.exitCode})`}${result.output.trim() ? `: ${result.output.trim().slice(0, 500)}` : ''}`);
  }
}

async function run(runner: ActionRunner, m: ServiceManager, args: string[]): Promise<void> {
  const r = await runner.run(args);
  if (r.notRunnable) throw new StagedrootError('TOOL_MISSING', `Cannot run systemctl ${args.join(' ')}: ${r.notRunnable}`, { value: m.command[0] });
  if (!r.ok) throw new ActionFailed(r.display, r);
}

/**
 * Undoes a live apply from its journal: every path back as it was, one daemon-reload when
 * the files included units, and each service already actioned (the failing one included)
 * restarted or reloaded again so that it runs the old configuration. Failures of the
 * service steps are reported, not thrown: the files are back either way.
 */
export async function undoLive(ctx: Context, j: LiveJournal, runner: ActionRunner): Promise<string[]> {
  restoreEntries(j.root, ctx.layout.liveApply, j.entries, ctx.faults);
  const problems: string[] = [];
  for (const args of undoSteps(j)) {
    const r = await runner.run(args);
    if (!r.ok) problems.push(`${r.display}: ${r.notRunnable ?? (r.exitCode === null ? r.output.trim().slice(0, 200) : `exit ${r.exitCode}`)}`);
  }
  ctx.dfs.removeTree(ctx.layout.liveApply);
  return problems;
}

/**
 * The activation decision of the staged deployment under another policy file (as stage
 * would have made it). Its modules (the policy document's parser, YAML and the
 * MachineConfig schemas among them) are loaded only here: an apply-live of the decision
 * stage recorded never evaluates them (a few hundred ms of its start under TCG).
 */
async function decideAgain(ctx: Context, s: BaseState, id: string, file: string): Promise<Activation> {
  const [{ activationOf, changedByManifests, loadDisruptionPolicy }, { changedSharedPaths }, { readSharedOps }, { ReadOnlyTree }] = await Promise.all([
    import('../stage/activation-of.js'),
    import('../persistent-dirs/changed-shared.js'),
    import('../persistent-dirs/apply.js'),
    import('../fs/trees/read-only-tree.js'),
  ]);
  const staged = mustFind(s, id);
  const base = mustFind(s, staged.parent ?? s.current);
  const { layout } = ctx;
  const u = updatePaths(layout, id);
  return activationOf({
    base,
    next: staged,
    changed: () => changedByManifests(layout.manifest(base.id), layout.manifest(id), [...u.changed.keys(), ...u.removed]),
    sharedChanged: () => changedSharedPaths(layout, readSharedOps(layout, id), sharedDirs(s), layout.sharedContent(id)),
    baseTree: new ReadOnlyTree(layout.tree(base.id)),
    newTree: new ReadOnlyTree(layout.tree(id)),
    policy: loadDisruptionPolicy(new ReadOnlyTree(layout.tree(base.id)), file),
  });
}

/**
 * apply-live: the staged deployment becomes active without a reboot. The staged tree
 * first gets the finalize merge on the update's own paths (planLiveMerge: the update wins
 * there, the local versions kept and reported; O(update), no walk of the running etc/:
 * every other local edit stays in the running tree, where the carry into this deployment
 * finds it, carryLiveEdits, at the next finalize or boot), then the intent journal is written
 * (the before-image of every path), then the update's entries are written into the
 * running root, one daemon-reload when units changed, and the actions in order, each
 * waiting for its job's result. Then the finalize's swap with how it got there: the
 * deployment is current, the old current its rollback, nothing staged; the next boot runs
 * it. A failed action or health check undoes everything (undoLive) and leaves the
 * deployment staged (or discards it), the failure in lastFailure.
 */
export async function applyLive(ctx: Context, s: BaseState, o: ApplyLiveOptions = {}): Promise<ApplyLiveResult> {
  const services = o.services ?? HOST_SYSTEMCTL;
  const step = o.onStep ?? (() => {});
  if (s.staged === null) throw new StagedrootError('NOTHING_STAGED', 'Nothing is staged: stage an update first');
  const staged = mustFind(s, s.staged);
  if (staged.locked) throw new StagedrootError('INVALID_TRANSITION', `Deployment ${staged.id} is held by a finalization lock: unlock it first`, { value: staged.id });
  const a = o.disruptionPolicy === undefined ? staged.activation : await decideAgain(ctx, s, staged.id, o.disruptionPolicy);
  if (a === undefined) throw new StagedrootError('INVALID_TRANSITION', `Deployment ${staged.id} has no activation decision (it was staged by an older stagedroot): stage it again`, { value: staged.id });
  if (a.mode !== 'live') {
    const why = a.reasons.map((r) => `${r.path ?? r.unit ?? r.field ?? ''}: ${r.why}`).join('; ');
    throw new StagedrootError('LIVE_NOT_POSSIBLE', `Deployment ${staged.id} (${staged.label}) needs a reboot: ${why}${a.reasonsOmitted ? ` (and ${a.reasonsOmitted} more)` : ''}; nothing was changed`, { value: staged.id, path: a.reasons[0]?.path });
  }
  const running = s.booted;
  if (running === null || liveEtcOf(s) !== s.current) throw new StagedrootError('INVALID_TRANSITION', `A reboot is pending (current ${s.current}, booted ${running ?? 'none'}): apply-live works on the running deployment only`, { value: staged.id });
  if (staged.parent !== s.current) throw new StagedrootError('INVALID_TRANSITION', `Deployment ${staged.id} was built from ${staged.parent ?? 'nothing'}, not from what runs (${s.current}): stage again`, { value: staged.id });

  // The connection to systemd is made while the merge runs, for a decision with actions to run.
  const runner = new ActionRunner(services);
  if (a.actions.some((x) => systemctlArgs(x) !== null)) runner.prepare();
  step('merge');
  const prepared = await prepareFinalize(ctx, s, { merge: 'live' }).catch((e: unknown) => {
    runner.close();
    throw e;
  });
  const changes = liveChanges(ctx, staged.id, running, sharedDirs(s));
  step('journal');
  let j = prepareJournal({
    dfs: ctx.dfs,
    dir: ctx.layout.liveApply,
    deployment: staged.id,
    source: ctx.layout.tree(staged.id),
    root: ctx.layout.tree(running),
    changes,
    daemonReload: changes.some((c) => c.path.startsWith('etc/systemd/')),
    actions: a.actions,
    services: services.command,
    bootId: currentBootId() ?? undefined,
  });
  try {
    step('files');
    writeEntries(j.root, j.source, j.entries, ctx.faults);
    j = markProgress(ctx.dfs, ctx.layout.liveApply, j, { filesWritten: true });
    if (j.daemonReload) {
      step('daemon-reload');
      await run(runner, services, ['daemon-reload']);
      j = markProgress(ctx.dfs, ctx.layout.liveApply, j, { daemonReloaded: true });
    }
    for (const [i, action] of j.actions.entries()) {
      step(actionText(action));
      const args = systemctlArgs(action);
      if (args !== null) await run(runner, services, args);
      j = markProgress(ctx.dfs, ctx.layout.liveApply, j, { actionsDone: i + 1 });
    }
    if (o.health) {
      step('health');
      const h = await runHealthChecks(o.health);
      const f = h.failedRequired[0];
      if (f !== undefined) throw new ActionFailed(`the required health check ${f.name} (${f.outcome})`, { exitCode: f.exitCode, output: f.output });
    }
  } catch (err) {
    if (!(err instanceof ActionFailed)) {
      // The machine's trouble (an I/O error, a missing systemctl): undone now where it can be; else the journal stays and the next writer's recovery undoes it.
      await undoLive(ctx, j, runner).catch((undo: unknown) => ctx.warn(`could not undo the live apply of ${staged.id} now (${(undo as Error).message}); the next writer's recovery does`));
      runner.close();
      throw err;
    }
    step('undo');
    const problems = await undoLive(ctx, j, runner).finally(() => runner.close());
    recordFailure(ctx, prepared.merged, staged.id, err, problems, o.discardOnFailure ?? false);
    throw new StagedrootError('LIVE_ACTION_FAILED', `apply-live of ${staged.id} (${staged.label}) was undone: ${err.message}${problems.length ? `; undo could not: ${problems.join(', ')}` : ''}; ${o.discardOnFailure ? 'the deployment was discarded' : 'it stays staged for a reboot'}`, { value: staged.id, cause: err });
  }
  runner.close();
  step('commit');
  const live = { at: ctx.now().toISOString(), from: running, actions: [...a.actions], paths: j.entries.length };
  commitFinalize(ctx, prepared, (st) => applyLiveTransition(st, live), 'apply-live');
  // The running tree becomes the rollback: its before-images go back into it once it no longer runs.
  keepForRollback(ctx, ctx.layout.liveApply, running);
  return { id: staged.id, running, paths: j.entries.map((e) => e.path), actions: [...a.actions], merge: prepared.report };
}

/** The undone apply in lastFailure; the deployment stays staged (its merged manifest recorded) or is discarded. */
function recordFailure(ctx: Context, merged: BaseState, id: string, err: ActionFailed, problems: string[], discard: boolean): void {
  const d = mustFind(merged, id);
  const failure: Failure = { id, label: d.label, phase: 'apply-live', reason: `${err.message}; undone${problems.length ? ` (except: ${problems.join(', ')})` : ''}`, at: ctx.now().toISOString(), code: 'LIVE_ACTION_FAILED', output: err.result.output };
  ctx.dfs.unlink(ctx.layout.mergeMarker(id));
  const withFailure = { ...merged, lastFailure: failure };
  const t = discard ? discardTransition(withFailure) : { next: withFailure, drop: [] };
  applyTransition(ctx, merged, t, 'apply-live-failed');
}
