import { changedSharedPaths } from '../persistent-dirs/changed-shared.js';
import type { Context } from '../context.js';
import { StagedrootError, formatIssues, type Issue } from '../errors.js';
import type { CopyPolicy } from '../fs/trees/copy-tree.js';
import { fsyncPaths, syncFilesystem, writeJson } from '../fs/trees/durable.js';
import { freeSpace, listDir, statPath } from '../fs/core/host-paths.js';
import { runTreeTask, warmTreeWorker } from '../fs/jobs/tree-jobs.js';
import { noFaults } from '../fs/core/faults.js';
import { treeTasks } from '../fs/trees/tasks.js';
import { manifestTasks } from '../fs/manifests/tasks.js';
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { changedPaths } from '../fs/manifests/patch-manifest.js';
import type { DisruptionPolicy } from '../activation/policy.js';
import type { Activation } from '../state/activation.js';
import { activationOf, changedByManifests } from './activation-of.js';
import { recordKernelHashes } from '../boot/entries/kernels.js';
import { applyTransition } from '../store/apply-transition.js';
import { mustFind, newRecord, nextId, stageBase, stageFailed, stageSucceeded } from '../state/model.js';
import { phaseOfStep, type BaseState, type DeploymentRecord, type Failure, type StagePhase } from '../state/schema.js';
import { buildTree, copyParts, startBaseCopy, startKeptCopy, type BuiltTree, type EarlyCopy } from './build-tree.js';
import { linksAll, stageLayers, type StageLayers } from './layer-stack.js';
import { runInTree, scratchVarLayout } from './run-in-tree.js';
import { makeBindMountPoints, removeBindMountPoints } from './run-binds.js';
import { ensurePackageDbPlaces } from '../persistent-dirs/package-db.js';
import { divertRunVar } from '../persistent-dirs/run-content.js';
import { RootFs } from '../fs/trees/root-fs.js';
import { SharedDivert } from '../persistent-dirs/divert.js';
import type { SharedOp } from '../persistent-dirs/ops.js';
import { mergedDirs, sharedDirs } from '../persistent-dirs/config.js';
import { snapshotsFrom } from '../fs/trees/storage.js';
import { settleMountPoints } from '../persistent-dirs/mount-points.js';
import { planShared } from '../persistent-dirs/apply.js';
import { conflictIssue, etcTypeConflicts } from '../merge/merge.js';
import type { CheckedSource } from './check-source.js';
import { checkStage, copyPolicyFor, DEFAULT_COPY_POLICY, labelBeforeCheck, planChanges, spaceEstimate, stageDisruptionPolicy, stageDivert, stagedKernelArguments, type CheckedStage } from './stage-plan.js';
import { describeHookFailure, type HookContext, type HookRun } from '../hooks/run-hooks.js';
import { checkTimeoutMs } from '../util/options.js';
import type { Source } from '../sources/source.js';
import type { ChangeSet } from '../changeset.js';
import { writeConfigRecord } from '../store/config-record.js';
import type { ConfigRecord } from '../state/config-record.js';
import { resolveBuiltins, type BuiltinOptions, type ResolvedBuiltins } from '../validate/builtins.js';
import { planCommandValidators, type CommandValidator, type PlannedValidator } from '../validate/command-validators.js';
import { checkFreeSpace, copyBytesOf, withSpaceFigures, type SpaceEstimate } from '../validate/free-space.js';
import type { Validator } from '../validate/types.js';
import { validateTree } from '../validate/validate-tree.js';

export interface StageProgress {
  phase: StagePhase;
  done: number;
  total: number | null;
  bytes: number;
}

export interface StageOptions {
  label?: string;
  validators?: readonly Validator[];
  /** Built-in checks (each on by default; `false` switches one off). */
  builtins?: BuiltinOptions;
  /** Executables that judge the staged tree (STAGEDROOT_TREE); output kept in the failure record. */
  commands?: readonly (CommandValidator | string)[];
  /** How the new tree is built from the booted one (default: hardlink usr/, reflink the rest). */
  copyPolicy?: Partial<CopyPolicy>;
  /** Called as each step starts (done 0) and as copy and apply progress. */
  onProgress?: (p: StageProgress) => void;
  /** Finalization lock: finalize leaves this deployment staged until `unlock`. */
  lock?: boolean;
  /** Aborts running validator commands. */
  signal?: AbortSignal;
  /** The detached signature of the source (default: SOURCE.minisig); required when the sysroot trusts keys. */
  signature?: string;
  /** Time limit of each phase hook (default 60 s). */
  hookTimeoutMs?: number;
  /** The output of a `stage --run` command, as it comes. */
  onCommandOutput?: (text: string) => void;
  /** A MachineConfiguration (YAML or JSON) whose spec.nodeDisruptionPolicy is merged over the MCO defaults; else the booted /etc/stagedroot/disruption-policy.yaml. */
  disruptionPolicy?: string;
}

export interface StageResult {
  id: string;
  label: string;
  path: string;
  /** Every path the stage changed in the new tree: written (links included) or removed. */
  delta: string[];
  warnings: Issue[];
  entries: number;
  bytes: number;
  /** The image is what the booted deployment already runs: nothing was staged (`id` is the booted one). */
  alreadyRunning?: boolean;
  /** An upgrade found the image the staged deployment already holds: nothing staged (`id` is the staged one). */
  alreadyStaged?: boolean;
  /** The pre-stage and post-stage hooks that ran. */
  hooks?: HookRun[];
  /** How it can become active: live (the node disruption policy's actions) or at a reboot, and what forces that. */
  activation?: Activation;
}

/** A stage's options as the sysroot runs it. */
export interface StageRunOptions extends StageOptions {
  /** An upgrade: nothing is staged when the staged deployment (under the lock) already holds the image. */
  unlessStaged?: boolean;
}

export { DEFAULT_COPY_POLICY } from './stage-plan.js';

/** Runs the stage's pre hooks about the update (the caller binds the phase from the operation table; null: none). */
export type PreHooks = ((about: Omit<HookContext, 'sysroot'>) => Promise<HookRun[]>) | null;

/**
 * Builds, validates and records a new staged deployment from the booted one, as a plain
 * sequence of steps (STAGE_PHASES). Nothing outside work/ID is written until the tree
 * is complete, validated and durable; then one rename moves it into deploy/ and one
 * atomic state write stages it. Any failure leaves the booted, current and rollback
 * trees untouched and is recorded in lastFailure under the step that failed (reason,
 * issues); the tree of a rejected update is kept for diagnosis.
 */
export async function stage(ctx: Context, state: BaseState, source: Source, opts: StageRunOptions, preHooks: PreHooks): Promise<StageOutcome> {
  let run: Run;
  try {
    run = startRun(ctx, state, source, opts, preHooks);
  } catch (error) {
    return { ok: false, error, failure: null }; // a bad option: nothing was recorded
  }
  warmCopyWorkers(run);
  try {
    const checked = await check(run);
    if (checked.alreadyRunning) return { ok: true, result: unchanged(run, run.base, { alreadyRunning: true }) };
    if (checked.alreadyStaged !== null) return { ok: true, result: unchanged(run, checked.alreadyStaged, { alreadyStaged: true }) };
    run.early = await startEarlyCopy(run);
    const changes = await plan(run);
    await preflight(run, changes);
    const built = await build(run, changes);
    const warnings = await validate(run, built);
    await sync(run, built);
    return { ok: true, result: await commit(run, changes, built, warnings) };
  } catch (err) {
    return recordFailure(run, err);
  }
}

/**
 * How a stage ended: staged (or already running), or failed with the failure it recorded
 * in lastFailure (null when nothing was recorded: a bad option, refused before the run).
 */
export type StageOutcome = { ok: true; result: StageResult } | { ok: false; error: unknown; failure: Failure | null };

/** One stage in progress: what its steps share, and what a failure record needs. */
interface Run {
  readonly ctx: Context;
  readonly state: BaseState;
  readonly source: Source;
  readonly opts: StageRunOptions;
  readonly builtins: ResolvedBuiltins;
  /** The command validators, their options checked once (startRun). */
  readonly commands: readonly PlannedValidator[];
  /** How the tree is built from the base (a command run in it gets a private copy: see plan). */
  policy: CopyPolicy;
  readonly base: DeploymentRecord;
  /** The node disruption policies the activation decision uses (the MCO defaults, the user's merged over them). */
  readonly disruptionPolicy: DisruptionPolicy;
  readonly id: string;
  /** work/ID: the tree, its manifest and delta while the stage runs. */
  readonly work: string;
  label: string;
  /** The sysroot's layer store as the planner sees it: an image's layers imported, its tree linked from them. */
  readonly layers: StageLayers;
  /** The step running now: a failure is recorded in it. */
  phase: StagePhase;
  /** The tree exists (a rejected update then keeps it for diagnosis). */
  treeBuilt: boolean;
  /** Output of failed validator commands, for the failure record. */
  output?: string;
  /** Free bytes when the stage started (for the figures of an ENOSPC). */
  freeAtStart: number | null;
  /** The preflight's estimate, kept for the figures of an ENOSPC. */
  estimate?: SpaceEstimate;
  changes?: ChangeSet;
  /** The config record of the base deployment (what the config it came from owns). */
  prior?: ConfigRecord | null;
  /** Runs the pre-stage hooks (the sysroot's one hook runner). */
  /** The operation's pre hooks (the operation table says which phase; null: none), run in plan. */
  readonly preHooks: PreHooks;
  /** Hooks that ran (pre-stage). */
  hooks: HookRun[];
  /** The source's identity and verified signature (see checkSource). */
  checked?: CheckedSource;
  /**
   * The `sync -f` started once the change set is applied: the kernel writes the new tree
   * back while the manifest is written and the tree validated (see sync).
   */
  treeSync?: Promise<void>;
  /** The copy of the base's usr/, or of its whole tree, started before the plan (startEarlyCopy), if one was. */
  early?: EarlyCopy;
  /** The early copy is of the whole base tree (startBaseCopy): its workers are the ones the manifest step takes after it. */
  earlyWhole?: boolean;
  /** The free-space preflight's figure for the copy, taken before an early copy of the whole tree (under these hardlink prefixes). */
  copyBytes?: { prefixes: readonly string[]; bytes: Promise<number> };
}

/** Checks the options (bad ones: USAGE, before anything is recorded) and picks the new id. */
function startRun(ctx: Context, state: BaseState, source: Source, opts: StageRunOptions, preHooks: PreHooks): Run {
  const { layout } = ctx;
  const builtins = resolveBuiltins(opts.builtins);
  if (opts.hookTimeoutMs !== undefined) checkTimeoutMs(opts.hookTimeoutMs, 'hookTimeoutMs');
  const id = nextId([state.lastId, ...state.deployments.map((d) => d.id), ...listDir(layout.deployDir), ...listDir(layout.workDir)]);
  const base = mustFind(state, stageBase(state));
  const policy = { ...DEFAULT_COPY_POLICY, ...opts.copyPolicy };
  const run: Run = {
    ctx,
    state,
    source,
    opts,
    builtins,
    disruptionPolicy: stageDisruptionPolicy(layout, base, opts),
    commands: planCommandValidators(opts.commands ?? []),
    policy,
    // The layers it imports are committed by its sync step, after the tree's sync (see sync).
    layers: stageLayers(ctx, () => run.policy, base.origin?.kind === 'oci-image' ? base.origin : undefined, sharedDirs(state)),
    base,
    id,
    work: layout.work(id),
    label: labelBeforeCheck(opts),
    phase: 'plan',
    treeBuilt: false,
    freeAtStart: null,
    preHooks,
    hooks: [],
  };
  return run;
}

/**
 * A copy of a big base tree runs in parts on as many workers (see copyParts): those
 * beyond the one the sysroot warmed start now, beside the plan, rather than when the
 * copy starts (each takes a worker's start, tens of milliseconds, before its part can
 * begin). None for a snapshot, which copies nothing.
 */
function warmCopyWorkers(run: Run): void {
  const { ctx, base } = run;
  const parts = copyParts(base.entries, ctx.faults);
  if (parts > 1 && !snapshotsFrom(ctx.layout.root, ctx.storage, ctx.layout.tree(base.id))) warmTreeWorker(parts);
}

/** Enters a step: from here a failure is recorded in it, and progress says so. */
function enter(run: Run, phase: StagePhase, total: number | null = null): void {
  at(run, phase);
  run.opts.onProgress?.({ phase, done: 0, total, bytes: 0 });
}

/** The one place the step is set: from here a failure is recorded in it (enter also announces it). */
function at(run: Run, phase: StagePhase): void {
  run.phase = phase;
}

/** plan, first: the pre-stage hooks (before the source is read), then the source's identity (an image's manifest) and, with trusted keys, its signature. */
async function check(run: Run): Promise<CheckedStage> {
  enter(run, 'plan');
  await preStage(run);
  const staged = run.opts.unlessStaged && run.state.staged !== null ? mustFind(run.state, run.state.staged) : null;
  const checked = await checkStage(run.ctx.layout, run.base, run.source, run.opts, staged);
  run.checked = checked.checked;
  run.label = checked.label;
  return checked;
}

/** The pre-stage hooks: the first that fails rejects the update, its output the reason. */
async function preStage(run: Run): Promise<void> {
  if (run.preHooks === null) return;
  const runs = await run.preHooks({ id: run.id, label: run.label, bootedTree: run.ctx.layout.tree(run.base.id) });
  run.hooks.push(...runs);
  const bad = runs.find((r) => !r.ok);
  if (bad) {
    run.output = bad.output;
    throw new StagedrootError('HOOK_REJECTED', `The update was stopped by the ${describeHookFailure(bad)}`, { path: `hooks/${bad.phase}/${bad.hook}` });
  }
}

/** The image the booted deployment runs, or (an upgrade) the staged one holds: nothing to stage (like `bootc upgrade` with no new image). */
function unchanged(run: Run, d: DeploymentRecord, why: { alreadyRunning: true } | { alreadyStaged: true }): StageResult {
  return { id: d.id, label: d.label, path: run.ctx.layout.tree(d.id), delta: [], warnings: [], entries: d.entries, bytes: d.bytes, ...why, hooks: run.hooks };
}

/**
 * An image update over a deployment of an image with the same bottom layer (the image's
 * config says so; the plan checks it) is built on a copy of the base tree's usr/ (the
 * layer store's onto or keptDelta path): that copy is started now, on the tree workers,
 * and runs while the plan imports the new layers and models the change on the main
 * thread and another worker (two cores: the copy's links and the import's writes side by
 * side; without workers, run from the TypeScript source, it runs inline first). buildTree
 * takes it if the plan decided on that copy, else removes it. Not where the usr/ files
 * would be copied rather than linked (a policy that copies them). With a fault hook (the
 * crash tests count the writes and replay a crash after each, in one order) the copy runs
 * whole before the plan rather than beside it: the same copy, taken or removed the same
 * way, its writes counted before the import's.
 */
async function startEarlyCopy(run: Run): Promise<EarlyCopy | undefined> {
  const { ctx, base } = run;
  if (run.checked?.info.overBase === true) return startEarlyBaseCopy(run);
  const bottom = base.origin?.kind === 'oci-image' ? base.origin.layers?.[0] : undefined;
  if (bottom === undefined || run.checked?.info.diffIds?.[0] !== bottom) return undefined;
  if (!linksAll(run.policy, run.layers.kept)) return undefined;
  ctx.dfs.mkdir(ctx.layout.workDir);
  const early = startKeptCopy(ctx, run.work, { ...baseTreeOf(run), keep: [run.layers.kept] }, run.opts.signal);
  if (ctx.faults !== noFaults) await early.done;
  return early;
}

/**
 * A source whose change set is applied over a copy of the base tree (an update spec, an
 * Ignition config: SourceInfo.overBase) gets that copy started now, on the tree workers,
 * while the main thread plans (parses and checks the document, resolves its paths in the
 * base tree): the copy is most of such a stage. Not where the tree is snapshotted (no
 * copy). Before anything is written, the preflight's figure for the copy (the bytes it
 * copies rather than links) is taken on a worker and checked against the free space: the
 * copy starts only with room for it (else the preflight, after the plan, refuses with the
 * whole figures). buildTree takes the copy when the plan kept the policy (the same
 * arguments), else removes it. With a fault hook it runs whole before the plan, as the
 * image's early copy does.
 */
async function startEarlyBaseCopy(run: Run): Promise<EarlyCopy | undefined> {
  const { ctx, base } = run;
  const { layout } = ctx;
  if (snapshotsFrom(layout.root, ctx.storage, layout.tree(base.id))) return undefined;
  // The two workers the manifest step takes after the copy (see build), started now if the copy's parts did not.
  warmTreeWorker(2);
  let gate: Promise<boolean> | undefined;
  const reserve = run.builtins.freeSpace;
  if (reserve !== null) {
    const prefixes = [...run.policy.hardlinkPrefixes];
    const bytes = copyBytesOf(layout.manifest(base.id), prefixes);
    bytes.catch(() => {}); // awaited by the preflight, which reports its failure
    run.copyBytes = { prefixes, bytes };
    gate = bytes.then((copyBytes) => {
      try {
        checkFreeSpace(layout.root, { copyBytes, changeBytes: 0, manifestBytes: 0, needed: copyBytes }, reserve);
        return true;
      } catch {
        return false;
      }
    });
  }
  ctx.dfs.mkdir(layout.workDir);
  const early = startBaseCopy(ctx, run.work, baseTreeOf(run), { signal: run.opts.signal, ...(gate === undefined ? {} : { gate }) });
  run.earlyWhole = true;
  if (ctx.faults !== noFaults) await early.done;
  return early;
}

/** The base tree as buildTree copies it (with its manifest, trusted under the policy's hardlink prefixes). */
function baseTreeOf(run: Run): { tree: string; manifest: string; entries: number; policy: CopyPolicy } {
  const { layout } = run.ctx;
  return { tree: layout.tree(run.base.id), manifest: layout.manifest(run.base.id), entries: run.base.entries, policy: run.policy };
}

/** plan: the source reads its input against the base tree and says what to change. */
async function plan(run: Run): Promise<ChangeSet> {
  // Still the plan step check() entered (its pre-stage hooks and the source's identity): not announced twice.
  const planned = await planChanges(run.ctx.layout, run.base, run.source, { checked: run.checked!, label: run.label, alreadyRunning: false, alreadyStaged: null }, run.opts, run.layers.handle);
  const { changes } = planned;
  run.prior = planned.prior;
  run.changes = changes;
  run.label = planned.label;
  run.policy = copyPolicyFor(run.policy, changes);
  return changes;
}

/** The free-space preflight, a built-in check (recorded as validate) run before anything is written. */
async function preflight(run: Run, changes: ChangeSet): Promise<void> {
  const { layout } = run.ctx;
  if (!run.builtins.freeSpace) {
    run.freeAtStart = freeSpace(layout.root).free; // one statfs, for the figures of an ENOSPC
    return;
  }
  at(run, 'validate'); // no progress event: validate proper comes after the tree is built
  const known = run.copyBytes !== undefined && samePrefixes(run.copyBytes.prefixes, run.policy.hardlinkPrefixes) ? await run.copyBytes.bytes : undefined;
  run.estimate = await spaceEstimate(layout, run.ctx.storage, run.base, run.policy, changes, known);
  run.freeAtStart = checkFreeSpace(layout.root, run.estimate, run.builtins.freeSpace).free;
}

function samePrefixes(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

/**
 * copy, apply, manifest: the new tree in work/ID (see buildTree). Entries under shared
 * directories are set aside for finalize (SharedDivert), the mount points left empty;
 * then conflicts finalize could not merge are refused now when they exist now.
 */
/** The built tree, and the entries set aside for the shared directories (what deploy/ID/shared-ops.json holds). */
type StagedBuild = BuiltTree & { sharedOps: readonly SharedOp[] };

async function build(run: Run, changes: ChangeSet): Promise<StagedBuild> {
  const { ctx, base, state } = run;
  const { layout } = ctx;
  const progress = run.opts.onProgress ?? (() => {});
  ctx.dfs.mkdir(layout.workDir);
  const shared = sharedDirs(state);
  const divert = stageDivert(ctx, state, changes, `${run.work}/shared`);
  // An image from the layer store replaces the tree (not copied: it would be cleared), its files linked where the policy links;
  // one whose lower layers are the base's image starts from a copy of the base tree's usr/ (run.layers.onto), the rest built from the store.
  const linkAt = run.layers.linkAt();
  const image = run.layers.diffIds !== null;
  // The manifest step runs two tasks at once (the tree's sync and the manifest pass): the
  // second worker starts now, beside the copy and the apply, not when the manifest waits for it
  // (an early copy of the whole tree holds two already, idle again when the manifest starts).
  if (run.earlyWhole !== true) warmTreeWorker(2);
  const built = await buildTree(ctx, {
    work: run.work,
    from: { tree: layout.tree(base.id), manifest: layout.manifest(base.id), entries: base.entries, policy: run.policy, manifestSha256: base.manifestSha256, replaced: image && run.layers.onto === 0, ...(image && run.layers.onto > 0 ? { keep: [run.layers.kept] } : {}) },
    ...(linkAt === null ? {} : { linkAt }),
    ...(run.early === undefined ? {} : { early: run.early }),
    changes,
    onStep: (step) => {
      enter(run, step);
      if (step === 'manifest') run.treeSync = startTreeSync(run.work);
    },
    onCopy: (p) => progress({ phase: 'copy', ...p }),
    onApply: (p) => progress({ phase: 'apply', ...p }),
    onTreeBuilt: () => void (run.treeBuilt = true),
    signal: run.opts.signal,
    divert: (op, root, mode) => divert.divert(op, root, mode),
    settle: (root) => settleMountPoints(root, shared),
    ...(changes.runInTree ? { afterApply: (tree: string) => runCommand(run, changes.runInTree!, tree, divert) } : {}),
  });
  if (divert.ops.length > 0) writeJson(ctx.dfs, `${run.work}/shared-ops.json`, { ops: divert.ops });
  const config = changes.config ?? carriedConfig(run.prior ?? null, run.checked?.info.origin !== undefined);
  if (config !== null) writeConfigRecord(ctx.dfs, run.work, config);
  await checkMergeConflicts(run, built, divert);
  return { ...built, sharedOps: divert.ops };
}

/**
 * The command of a `stage --run`, in the new tree (see runInTree): its /var a scratch
 * directory beside the tree whose package-database links point into the tree itself,
 * removed afterwards (the shared /var is never written by a stage); what the command
 * created there is set aside as initial content for the shared /var (divertRunVar).
 * Its output is kept for the failure record.
 */
async function runCommand(run: Run, what: { command: string; timeoutMs: number; binds?: readonly string[] }, tree: string, divert: SharedDivert): Promise<void> {
  const { ctx } = run;
  const varDir = `${run.work}/run-var`;
  ctx.dfs.mkdir(varDir, 0o755);
  const scratch = new RootFs(varDir, { faults: ctx.faults });
  ensurePackageDbPlaces(new RootFs(tree, { faults: ctx.faults }), sharedDirs(run.state).includes('var') ? ctx.layout.shared('var') : undefined);
  const layout = scratchVarLayout((usr) => new ReadOnlyTree(tree).lstat(usr)?.isDirectory() ?? false);
  for (const d of layout.dirs) scratch.mkdir(d.path, { mode: d.mode });
  for (const l of layout.links) scratch.symlink(l.path, l.target);
  const treeFs = new RootFs(tree, { faults: ctx.faults });
  const binds = what.binds ?? [];
  const mountPoints = makeBindMountPoints(treeFs, new ReadOnlyTree('/'), binds);
  try {
    await runInTree({ command: what.command, tree, varDir, binds, timeoutMs: what.timeoutMs, onOutput: run.opts.onCommandOutput, signal: run.opts.signal, onResult: (r) => void (run.output = r.output) });
    removeBindMountPoints(treeFs, mountPoints);
    await divertRunVar(varDir, treeFs, divert);
  } finally {
    ctx.dfs.removeTree(varDir);
  }
}

/**
 * The config record a deployment not staged from a config inherits: its base's, since
 * the paths that config wrote are still there; an image replaces the whole tree, so
 * after one the config owns no path (its kernel arguments stay: they are inherited).
 */
function carriedConfig(prior: ConfigRecord | null, image: boolean): ConfigRecord | null {
  if (prior === null) return null;
  return image ? { ...prior, owned: [] } : prior;
}

/**
 * Conflicts between the running system's local changes and the update that finalize
 * could not merge (a directory on one side, a non-directory on the other), refused at
 * stage when they exist already (bootc: "Merge conflicts found in etc"). Recorded as
 * apply: the update cannot be applied to the booted system as it is. Only the update's
 * paths are looked at (O(update)), on a worker thread.
 */
async function checkMergeConflicts(run: Run, built: BuiltTree, divert: SharedDivert): Promise<void> {
  const { ctx, state, base, id, work } = run;
  const conflicts = [
    // The delta as buildTree holds it (what it wrote to delta.json): not read back and parsed again.
    ...(state.booted === base.id ? await etcTypeConflicts(ctx.layout, base.id, id, mergedDirs(state), { manifest: built.manifest, delta: `${work}/delta.json` }, { changed: new Map(built.changed.map((e) => [e.p, e.t])), removed: new Set(built.removed) }) : []),
    ...planShared(ctx.layout, id, sharedDirs(state), `${work}/shared`, divert.ops).typeConflicts,
  ];
  if (conflicts.length === 0) return;
  at(run, 'apply');
  const issues = conflicts.map(conflictIssue);
  throw new StagedrootError('MERGE_CONFLICT', `Merge conflicts found: the running system and the update disagree on ${conflicts.length} path${conflicts.length === 1 ? '' : 's'} (a directory on one side, a non-directory on the other):\n${formatIssues(issues)}`, { path: conflicts[0]!.path, issues });
}

/** validate: built-ins, command validators, the caller's validators; any error rejects. Returns the warnings. */
async function validate(run: Run, built: BuiltTree): Promise<Issue[]> {
  const { id, label, opts } = run;
  enter(run, 'validate', opts.validators?.length ?? 0);
  const baseTree = run.ctx.layout.tree(run.base.id);
  const vctx = { tree: built.tree, staged: new ReadOnlyTree(built.tree), id, label, manifest: built.manifest, delta: built.delta, deltaEntries: built.changed, baseTree, base: new ReadOnlyTree(baseTree), signal: opts.signal };
  const result = await validateTree(vctx, { builtins: run.builtins, commands: run.commands, validators: opts.validators });
  run.output = result.output;
  const errors = result.issues.filter((i) => i.severity === 'error');
  if (errors.length > 0) {
    throw new StagedrootError('VALIDATION_FAILED', `Validation rejected deployment ${id} (${label}) with ${errors.length} error${errors.length === 1 ? '' : 's'}:\n${formatIssues(errors)}`, { issues: result.issues, path: errors[0]!.path });
  }
  return result.issues.filter((i) => i.severity === 'warning');
}

/**
 * sync: everything in work/ID durable before it is committed (an I/O error stops here).
 * The tree's own writeback started when the change set was applied (its `sync -f` ran
 * beside the manifest and validate steps); what was written since is made durable here:
 * the manifest (or the link to its base's, the overlay and the file's summary beside it) and their directory entries (delta.json and shared-ops.json are written
 * durably), or, when command validators ran (an executable could write into the tree),
 * everything again with a second `sync -f`.
 */
async function sync(run: Run, built: BuiltTree): Promise<void> {
  enter(run, 'sync');
  if (run.treeSync === undefined) await syncFilesystem(run.work);
  else {
    await run.treeSync;
    if (run.commands.length > 0) await syncFilesystem(run.work);
    else await fsyncPaths([built.manifest, ...(built.overlay === undefined ? [] : [built.overlay]), ...(built.summary === undefined ? [] : [built.summary]), run.work]);
  }
  await commitLayers(run);
}

/**
 * The layers the plan imported, committed into the layer store (their rename into diff/):
 * their objects and indexes were written back by the tree's sync, which followed the
 * imports (the store is on the sysroot's filesystem; where it is not, it is synced on its
 * own first). One syncfs for the imports and the tree instead of one each: the tree's
 * links dirty the objects' inodes again, and were written back twice.
 */
async function commitLayers(run: Run): Promise<void> {
  if (!run.layers.pending) return;
  if (!sameFilesystem(run.layers.dir, run.work)) await syncFilesystem(run.layers.dir);
  run.layers.commitPending();
}

/**
 * A failed stage keeps the layers it imported whole (a stage again need not read them):
 * made durable, then committed. Neither step may hide the stage's own failure: what either
 * leaves (a layer still under tmp/, one committed without its blob link) is the next
 * prepare's sweep or the next import's, as after a crash.
 */
async function keepImportedLayers(run: Run): Promise<void> {
  if (!run.layers.pending) return;
  try {
    await syncFilesystem(run.layers.dir);
    run.layers.commitPending();
  } catch {
    // Left to the sweep (above); the failure recorded is the stage's.
  }
}

/** Whether two existing paths are on one filesystem (a syncfs of one covers the other). */
function sameFilesystem(a: string, b: string): boolean {
  const x = statPath(a);
  const y = statPath(b);
  return x !== null && y !== null && x.dev === y.dev;
}

/** Starts `sync -f` of the stage's filesystem; its failure is reported where it is awaited (sync). */
function startTreeSync(work: string): Promise<void> {
  const p = syncFilesystem(work);
  p.catch(() => {}); // awaited in sync; a stage that fails before never reads it
  return p;
}

/** commit: the tree moves into deploy/ID and one atomic state write stages it. */
async function commit(run: Run, changes: ChangeSet, built: StagedBuild, warnings: Issue[]): Promise<StageResult> {
  const { ctx, state, id, label } = run;
  const { layout } = ctx;
  enter(run, 'commit');
  ctx.dfs.rename(run.work, layout.deployment(id));
  const manifestSha256 = built.manifestSha256 ?? (await runTreeTask(manifestTasks.hashFile, { file: layout.manifest(id) }));
  const rec = newRecord({ id, label, parent: run.base.id, at: ctx.now().toISOString(), entries: built.entries, bytes: built.bytes, manifestSha256, source: changes.description, kernelArguments: stagedKernelArguments(run.base, changes) });
  rec.locked = run.opts.lock ?? false;
  if (run.checked?.info.origin) rec.origin = { ...run.checked.info.origin, ...(run.layers.diffIds !== null ? { layers: run.layers.diffIds } : {}) };
  if (run.checked?.signature) rec.signature = run.checked.signature;
  rec.activation = activationOf({ base: run.base, next: rec, changed: () => changedOf(layout.manifest(run.base.id), layout.manifest(id), built), sharedChanged: () => changedSharedPaths(layout, built.sharedOps, sharedDirs(state), layout.sharedContent(id)), baseTree: new ReadOnlyTree(layout.tree(run.base.id)), newTree: new ReadOnlyTree(layout.tree(id)), policy: run.disruptionPolicy });
  if (state.bootDir) recordKernelHashes(ctx, id);
  applyTransition(ctx, state, stageSucceeded(state, rec), 'stage');
  return { id, label, path: layout.tree(id), delta: changedPaths(built), warnings: [...built.warnings, ...warnings], entries: rec.entries, bytes: rec.bytes, hooks: run.hooks, activation: rec.activation };
}

/**
 * The paths of the delta whose entry the update changed: what the manifest pass found
 * the same as the base's left out (no lookup in the two manifests), else the two
 * manifests compared (changedByManifests).
 */
function changedOf(baseManifest: string, manifest: string, built: StagedBuild): string[] {
  const paths = changedPaths(built);
  if (built.same === undefined) return changedByManifests(baseManifest, manifest, paths);
  const same = new Set(built.same);
  return paths.filter((p) => !same.has(p));
}

/**
 * Records a failed stage in lastFailure, and returns the failure with the error. The update's own fault (a
 * rejection) keeps its tree for diagnosis; a machine fault (disk full, I/O) frees the space.
 */
async function recordFailure(run: Run, err: unknown): Promise<StageOutcome> {
  const { ctx, state, id, work } = run;
  const { layout } = ctx;
  let e = err instanceof StagedrootError ? err : new StagedrootError('IO', (err as Error)?.message ?? String(err), { cause: err });
  if (e.code === 'NO_SPACE' && e.errno !== undefined) {
    // The filesystem ran out mid-way: say how much there was and how much it takes (before the partial tree goes).
    try {
      const est = run.estimate ?? (run.changes ? await spaceEstimate(layout, ctx.storage, run.base, run.policy, run.changes) : null);
      e = withSpaceFigures(e, layout.root, run.freeAtStart, est);
    } catch {
      // The figures are extra: without them the error still names the path and the errno.
    }
  }
  const failure: Failure = {
    id,
    label: run.label,
    phase: phaseOfStep(run.phase),
    step: run.phase,
    reason: e.message,
    at: ctx.now().toISOString(),
    code: e.code,
    ...(e.path === undefined ? {} : { path: e.path }),
    ...(e.issues.length ? { issues: e.issues } : {}),
    ...(run.output === undefined ? {} : { output: run.output }),
  };
  // An early copy still running (the plan failed) stops before its work dir goes.
  run.early?.stop();
  await run.early?.done;
  await keepImportedLayers(run);
  const rec = e.isRejection && run.treeBuilt ? await keepForDiagnosis(run, failure) : null;
  if (rec === null) await runTreeTask(treeTasks.removeTree, { path: work }, { faults: ctx.faults });
  applyTransition(ctx, state, stageFailed(state, failure, rec), 'stage-failed');
  return { ok: false, error: e, failure };
}

/**
 * Moves a rejected tree into deploy/ID, durable like any deployment so a power loss cannot
 * tear it. When it cannot be made durable it is not kept (null): nothing is renamed after
 * an I/O error.
 */
async function keepForDiagnosis(run: Run, failure: Failure): Promise<DeploymentRecord | null> {
  const { ctx, id, work } = run;
  try {
    await syncFilesystem(work);
  } catch (err) {
    ctx.warn(`could not sync the rejected tree ${work} (${(err as Error).message}); it is removed rather than kept`);
    return null;
  }
  ctx.dfs.rename(work, ctx.layout.deployment(id));
  return newRecord({ id, label: run.label, parent: run.base.id, at: ctx.now().toISOString(), source: run.changes?.description ?? run.source.describe, failure });
}
