import { makeContext, type Context, type ContextOptions } from './context.js';
import { isStagedrootError, StagedrootError } from './errors.js';
import { bootInput, type BootResult } from './boot/boot.js';
import { restoreRollbackTrees } from './commit/rollback-tree.js';
import type { BootRecordPlace } from './boot/boot-record.js';
import type { ApplyLiveOptions, ApplyLiveResult } from './commit/apply-live.js';
import { carryLiveEdits } from './commit/carry-live.js';
import type { FinalizeOptions, FinalizeResult } from './commit/finalize.js';
import type { PathChange } from './fs/manifests/diff-manifests.js';
import { exists, readLink } from './fs/core/host-paths.js';
import type { Drift } from './fs/manifests/verify-tree.js';
import { runTreeTask, warmTreeWorker } from './fs/jobs/tree-jobs.js';
import { storageKind, type StorageKind } from './fs/trees/storage.js';
import { bootedFailure } from './rollback/rollback.js';
import { effectiveState, mustFind } from './state/model.js';
import type { RecoveryReport } from './store/recover.js';
import { applyPlan, recoverIfFree, runOperation } from './operations/run-operation.js';
import type { HookTimeout } from './operations/phase-hooks.js';
import { preHooksOf, runHooked, type HookPoints } from './operations/hooked.js';
import type { WriterOperation } from './operations/table.js';
import type { BaseState, Failure, Phase } from './state/schema.js';
import { statusView, type Status } from './state/status.js';
import { loadState } from './store/state-file.js';
import { checkWaitSeconds } from './util/options.js';
import type { Source } from './sources/source.js';
import type { InitOptions } from './stage/init.js';
import { checkFleetLockConfig, writeFleetLockConfig, type FleetLockConfig } from './fleetlock/config.js';
import { addTrustedKey, loadTrustedKeys, readPublicKeyFile, removeTrustedKey } from './trust/keys.js';
import type { StageOptions, StageResult, StageRunOptions } from './stage/stage.js';
import type { UpdateCheck, UpdateOptions, UpdateResult } from './stage/track.js';
import type { RegistrySourceOptions } from './sources/registry/source.js';
import type { DryRunOptions, DryRunResult } from './stage/dry-run.js';
import type { BuiltinOptions } from './validate/builtins.js';

export interface SysrootOptions extends ContextOptions {
  /** Seconds a writer waits for another writer's lock (0: fail at once with BUSY). */
  waitSeconds?: number;
  /**
   * Recover when the sysroot is opened (default true), so that a handle kept for reading
   * reads a recovered sysroot. false: the open takes no lock and writes nothing (it works
   * on a read-only sysroot; reads still resolve an interrupted swap consistently), and
   * recovery is left to the first write, which recovers under its lock before it plans
   * anyway: for reading only, or for a handle opened for one write (the CLI's verbs).
   */
  recoverOnOpen?: boolean;
  /** @deprecated the older name of `recoverOnOpen: false`. */
  readOnly?: boolean;
  /** Built-in validators for every stage through this handle (a stage's own `builtins` win key by key). */
  builtins?: BuiltinOptions;
}

/** What `stage` accepts: a Source, a path (kind detected from content), or a spec object. */
export type StageInput = Source | string | { [key: string]: unknown };

// The modules of staging, finalizing, the sources and the hooks are loaded by the
// operation that uses them: `status`, `boot` and `mark-good` (at every boot, by the CLI)
// and a library import do not parse, compile and run them.
async function toSource(input: StageInput): Promise<Source> {
  if (typeof input === 'string') return (await import('./sources/detect.js')).pathSource(input);
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new StagedrootError('USAGE', `stage() takes a path, a Source or an update spec object, got ${Array.isArray(input) ? 'an array' : input === null ? 'null' : typeof input}`, { option: 'source', value: input });
  }
  if (typeof (input as Source).plan === 'function' && typeof (input as Source).kind === 'string') return input as Source;
  if ('ignition' in input) return (await import('./sources/ignition/index.js')).ignitionSource(input);
  return (await import('./sources/spec.js')).specSource(input);
}

/**
 * A sysroot: the deployments and their state. Writers take an inter-process lock and
 * run crash recovery first; readers (`status`, `diff`, `verify`) never take the lock and
 * never write.
 */
export class Sysroot {
  /** The internals (context, layout, fault hook): never handed out, they would bypass the lock. */
  private readonly ctx: Context;
  private readonly waitSeconds: number;
  /** What recovery did when this handle was opened (empty when nothing was needed or the lock was busy). */
  readonly recovery: RecoveryReport['actions'];

  private readonly builtins: BuiltinOptions;

  private constructor(ctx: Context, waitSeconds: number, recovery: string[], builtins: BuiltinOptions = {}) {
    this.builtins = builtins;
    this.ctx = ctx;
    this.waitSeconds = waitSeconds;
    this.recovery = recovery;
  }

  get path(): string {
    return this.ctx.layout.root;
  }

  /** Creates a sysroot with a first deployment (empty, from a directory, or from a source) that is current, booted and good. */
  static async init(dir: string, o: InitOptions & SysrootOptions = {}): Promise<Sysroot> {
    const waitSeconds = checkWaitSeconds(o.waitSeconds ?? 0);
    const ctx = makeContext(dir, o);
    const { initSysroot } = await import('./stage/init.js');
    await runOperation(ctx, 'init', waitSeconds, () => initSysroot(ctx, o));
    return new Sysroot(ctx, waitSeconds, [], o.builtins);
  }

  /**
   * Opens a sysroot and recovers it from any interrupted operation. When another writer
   * holds the lock, recovery is left to it and the handle still reads consistently.
   */
  static async open(dir: string, o: SysrootOptions = {}): Promise<Sysroot> {
    const waitSeconds = checkWaitSeconds(o.waitSeconds ?? 0);
    const ctx = makeContext(dir, o);
    loadState(ctx.layout); // NOT_A_SYSROOT / STATE_CORRUPT early, with the file named
    const actions = (o.recoverOnOpen ?? !o.readOnly) ? ((await recoverIfFree(ctx)) ?? []) : [];
    return new Sysroot(ctx, waitSeconds, actions, o.builtins);
  }

  /** The state in effect now (a pointer swap in progress is resolved by the symlink). Never writes. */
  state(): BaseState {
    const { layout } = this.ctx;
    const loaded = loadState(layout);
    if (loaded.recoveredFrom) this.ctx.warn(`state.json is unreadable (${loaded.brokenReason}); showing the last good copy`);
    return effectiveState(loaded.state, layout.idFromLink(readLink(layout.currentLink)));
  }

  /** How new deployment trees are stored here (statfs of the sysroot, and the storage option). */
  storage(): StorageKind {
    return storageKind(this.ctx.layout.root, this.ctx.storage);
  }

  private view(s: BaseState): Status {
    return statusView(s, this.ctx.layout, this.storage());
  }

  status(): Status {
    return this.view(this.state());
  }

  private write<T>(operation: WriterOperation, fn: (s: BaseState) => Promise<T> | T): Promise<T> {
    return runOperation(this.ctx, operation, this.waitSeconds, fn);
  }

  /**
   * Stages an update. Rejections throw a StagedrootError whose `isRejection` is true (exit 3).
   * (async, like `prune`: bad input rejects the promise rather than throwing synchronously)
   */
  async stage(input: StageInput, o: StageOptions = {}): Promise<StageResult> {
    return this.stageRun(input, o);
  }

  private async stageRun(input: StageInput, o: StageRunOptions): Promise<StageResult> {
    warmTreeWorker(); // its start overlaps loading the stage's modules, the lock, recovery and the source's plan
    const [source, { stage }] = await Promise.all([toSource(input), import('./stage/stage.js')]);
    return this.write('stage', async (s) => {
      // Only a failure the stage recorded (not a bad option) is the update failing.
      let failure: Failure | null = null;
      const points: HookPoints<StageResult> = {
        failed: () => (failure === null ? null : { id: failure.id, label: failure.label, reason: failure.reason }),
        done: (r) => (r.alreadyRunning || r.alreadyStaged ? null : { id: r.id, label: r.label, tree: r.path }),
      };
      const { result: r, post } = await runHooked(this.ctx, 'stage', points, o, async () => {
        const out = await stage(this.ctx, s, source, { ...o, builtins: { ...this.builtins, ...o.builtins } }, preHooksOf(this.ctx, 'stage', o));
        if (out.ok) return out.result;
        failure = out.failure;
        throw out.error;
      });
      if (post.length > 0) r.hooks = [...(r.hooks ?? []), ...post];
      return r;
    });
  }

  /**
   * `stagedroot upgrade`: the tracked image (the staged deployment's reference after a
   * switch, else the booted one's) pulled and staged again; nothing when its digest is
   * the one that deployment already runs or holds.
   */
  async upgrade(o: UpdateOptions = {}): Promise<UpdateResult> {
    const { trackedImage, updateSource } = await import('./stage/track.js');
    const t = trackedImage(this.state(), this.ctx.layout);
    const { source, pullspec } = await updateSource(t.ref, t, o.pull);
    // Whether the staged deployment already holds the image is decided by the stage's plan, under the lock.
    return { ...(await this.stageRun(source, { ...o, unlessStaged: true })), pullspec };
  }

  /** `stagedroot switch REF`: stages the image REF names (`docker://…` or a bare pullspec), which later upgrades follow. */
  async switch(ref: string, o: UpdateOptions = {}): Promise<UpdateResult> {
    const { switchReference, updateSource } = await import('./stage/track.js');
    const { source, pullspec } = await updateSource(switchReference(ref), null, o.pull);
    return { ...(await this.stage(source, o)), pullspec };
  }

  /** `upgrade --check`: the tracked image's digest and layers (manifests and config fetched only), and whether it is new. */
  async checkUpgrade(o: RegistrySourceOptions = {}): Promise<UpdateCheck> {
    const { trackedImage, checkUpdate } = await import('./stage/track.js');
    const s = this.state();
    const t = trackedImage(s, this.ctx.layout);
    return checkUpdate(s, t.ref, t, o);
  }

  /** `switch REF --check`: the same for REF, against the booted deployment. */
  async checkSwitch(ref: string, o: RegistrySourceOptions = {}): Promise<UpdateCheck> {
    const { switchReference, checkUpdate } = await import('./stage/track.js');
    return checkUpdate(this.state(), switchReference(ref), null, o);
  }

  /**
   * What `stage` would do, without writing or recording anything: the changes against
   * the booted tree and every check that needs no new tree. Takes no lock.
   */
  async dryRun(input: StageInput, o: DryRunOptions = {}): Promise<DryRunResult> {
    const [source, { dryRun }] = await Promise.all([toSource(input), import('./stage/dry-run.js')]);
    return dryRun(this.ctx, this.state(), source, { ...o, builtins: { ...this.builtins, ...o.builtins } });
  }

  /**
   * Finalize, with its hooks: a failing pre-finalize hook stops it (HOOK_FAILED, the
   * staged deployment stays staged); post-finalize runs when a deployment became current.
   */
  finalize(o: FinalizeOptions & HookTimeout = {}): Promise<FinalizeResult> {
    return this.write('finalize', async (s) => {
      const staged = s.staged === null ? null : mustFind(s, s.staged);
      const about = staged && { id: staged.id, label: staged.label, tree: this.ctx.layout.tree(staged.id) };
      const points: HookPoints<FinalizeResult> = {
        pre: staged && about && !staged.locked ? { about, stop: { code: 'HOOK_FAILED', value: staged.id, message: (why: string) => `Finalize of deployment ${staged.id} (${staged.label}) was stopped by the ${why}; it stays staged` } } : null,
        failed: (err) => ({ id: staged?.id, label: staged?.label, reason: (err as Error).message }),
        done: (r) => (r.finalized ? about : null),
      };
      const { finalize } = await import('./commit/finalize.js');
      return (await runHooked(this.ctx, 'finalize', points, o, () => finalize(this.ctx, s, o))).result;
    });
  }

  /**
   * Makes the staged deployment active without a reboot, when its activation decision is
   * live (commit/apply-live.ts): a decision of reboot is LIVE_NOT_POSSIBLE (exit 3), nothing
   * changed; a failed action or health check is undone (LIVE_ACTION_FAILED), on-failure hooks run.
   */
  applyLive(o: ApplyLiveOptions & HookTimeout = {}): Promise<ApplyLiveResult> {
    return this.write('apply-live', async (s) => {
      const { applyLive } = await import('./commit/apply-live.js');
      const staged = s.staged === null ? undefined : mustFind(s, s.staged);
      // A refusal (a reboot decision) changed nothing; a failed action was undone: that is the apply failing.
      const points: HookPoints<ApplyLiveResult> = { failed: (err) => (isStagedrootError(err, 'LIVE_ACTION_FAILED') ? { id: staged?.id, label: staged?.label, reason: err.message } : null) };
      return (await runHooked(this.ctx, 'apply-live', points, o, () => applyLive(this.ctx, s, o))).result;
    });
  }

  /**
   * The boot hook, then post-boot hooks (and on-rollback ones when it fell back).
   * `o.runDir`/`o.rootDir`: where the initramfs's record is (default /run/stagedroot, for the root /).
   */
  boot(o: HookTimeout & BootRecordPlace = {}): Promise<BootResult> {
    return this.write('boot', async (s) => {
      let label: string | undefined;
      const about = (r: BootResult) => {
        const id = r.event.kind === 'booted' ? r.event.id : r.event.to;
        return { id, label, tree: this.ctx.layout.tree(id) };
      };
      const points: HookPoints<BootResult> = { rolledBack: (r) => (r.event.kind === 'fell-back' ? { ...about(r), reason: r.event.reason } : null), done: about };
      return (
        await runHooked(this.ctx, 'boot', points, o, async () => {
          const { outcome, state: booted } = applyPlan(this.ctx, s, 'boot', bootInput(this.ctx, { runDir: o.runDir, rootDir: o.rootDir }));
          // A crash after a live apply skipped the shutdown's carry of the /etc edits made since: done now, before the services start.
          const actions: string[] = [];
          const state = await carryLiveEdits(this.ctx, booted, 'boot', actions);
          // Then the tree the apply wrote into, if it no longer runs, gets its own files back (a rollback boots its config).
          restoreRollbackTrees(this.ctx, state, actions, { bootRecorded: true });
          const { event, finalizeFailure } = outcome;
          label = mustFind(state, event.kind === 'booted' ? event.id : event.to).label;
          return { event, finalizeFailure, actions };
        })
      ).result;
    });
  }

  /** `o.healthChecks`: how many health checks passed (the health service says; 0 when none are configured). */
  markGood(o: { healthChecks?: number } = {}): Promise<Status> {
    return this.write('mark-good', (s) => this.view(applyPlan(this.ctx, s, 'mark-good', { checks: o.healthChecks ?? null }).state));
  }

  markBad(reason = 'marked bad', o: { phase?: Phase; output?: string } & HookTimeout = {}): Promise<Status> {
    return this.write('mark-bad', async (s) => {
      const failure = bootedFailure(s, reason, o.phase ?? 'health', this.ctx.now().toISOString(), o.output);
      return this.rolledBack('mark-bad', this.view(applyPlan(this.ctx, s, 'mark-bad', { failure }).state), reason, o);
    });
  }

  rollback(o: { discardStaged?: boolean } & HookTimeout = {}): Promise<Status> {
    return this.write('rollback', async (s) => this.rolledBack('rollback', this.view(applyPlan(this.ctx, s, 'rollback', { discardStaged: o.discardStaged }).state), 'manual rollback', o));
  }

  /** The operation's on-rollback hooks (the table says it has them), about the deployment the next boot goes back to. */
  private async rolledBack(op: 'mark-bad' | 'rollback', st: Status, reason: string, o: HookTimeout): Promise<Status> {
    const points: HookPoints<Status> = {
      rolledBack: (v) => {
        const d = v.deployments.find((x) => x.id === v.current);
        return { id: v.current, label: d?.label, tree: d?.path, reason };
      },
    };
    return (await runHooked(this.ctx, op, points, o, async () => st)).result;
  }

  discardStaged(): Promise<{ removed: string }> {
    return this.write('discard', (s) => ({ removed: applyPlan(this.ctx, s, 'discard', {}).outcome.drop[0]! }));
  }

  async prune(o: { keep?: number } = {}): Promise<{ removed: string[] }> {
    const keep = o.keep ?? 3;
    if (!Number.isInteger(keep) || keep < 0) throw new StagedrootError('USAGE', `Expected --keep to be a non-negative integer, got ${String(o.keep)}`, { option: 'keep', value: o.keep });
    return this.write('prune', (s) => ({ removed: applyPlan(this.ctx, s, 'prune', { keep }).outcome.drop }));
  }

  pin(id: string, pinned = true): Promise<Status> {
    return this.write('pin', (s) => this.view(applyPlan(this.ctx, s, 'pin', { id, pinned }).state));
  }

  /** Finalization lock on the staged deployment (finalize leaves it until unlocked). */
  setFinalizationLock(locked: boolean): Promise<Status> {
    const op = locked ? 'lock' : 'unlock';
    return this.write(op, (s) => this.view(applyPlan(this.ctx, s, op, {}).state));
  }

  /** Changed paths between two deployments, by manifest (compared on a worker thread). */
  async diff(a: string, b: string): Promise<PathChange[]> {
    const s = this.state();
    const { manifestTasks } = await import('./fs/manifests/tasks.js');
    return runTreeTask(manifestTasks.diffManifests, { a: this.manifestOf(s, a), b: this.manifestOf(s, b) });
  }

  /** A deployment's manifest; a deployment whose stage failed before it had one is named as such. */
  private manifestOf(s: BaseState, id: string): string {
    const d = mustFind(s, id);
    const file = this.ctx.layout.manifest(id);
    if (!exists(file)) {
      const why = d.failure ? ` (its stage failed in ${d.failure.phase}: ${d.failure.reason.split('\n')[0]})` : '';
      throw new StagedrootError('NO_MANIFEST', `Deployment ${id} has no manifest${why}; its tree is at ${this.ctx.layout.tree(id)}`, { value: id, path: file });
    }
    return file;
  }

  /**
   * A deployment's tree (default: booted) against its manifest, walked and hashed on a
   * worker thread; progress (entries done) arrives on the caller's thread, and a fired
   * `signal` stops the walk (ABORTED).
   */
  async verify(id?: string, o: { onProgress?: (done: number) => void; signal?: AbortSignal } = {}): Promise<{ id: string; drift: Drift[] }> {
    const s = this.state();
    const which = id ?? s.booted ?? s.current;
    const { manifestTasks } = await import('./fs/manifests/tasks.js');
    const drift = await runTreeTask(manifestTasks.verifyTree, { tree: this.ctx.layout.tree(which), manifest: this.manifestOf(s, which) }, { onProgress: o.onProgress, signal: o.signal });
    return { id: which, drift };
  }

  /** The trusted keys' ids, as minisign prints them. With none, sources need no signature. */
  trustedKeys(): string[] {
    return loadTrustedKeys(this.ctx.layout).map((k) => k.keyId);
  }

  /** Trusts a minisign/signify public key (a key file, or the base64 line `minisign -P` takes). */
  addTrustedKey(file: string): Promise<{ keyId: string; added: boolean }> {
    const key = readPublicKeyFile(file);
    return this.write('trust', () => addTrustedKey(this.ctx, key));
  }

  /** Stops trusting a key (by the id minisign prints). */
  removeTrustedKey(keyId: string): Promise<{ keyId: string }> {
    return this.write('trust', () => removeTrustedKey(this.ctx, keyId));
  }

  /**
   * Sets the FleetLock settings `reboot` and `health` use (SYSROOT/fleetlock.json): checked
   * (USAGE naming the field, a rejected promise) before the lock is taken, then written
   * durably as a writer.
   */
  async configureFleetLock(config: FleetLockConfig): Promise<FleetLockConfig> {
    const checked = checkFleetLockConfig(config);
    return this.write('fleetlock', () => {
      writeFleetLockConfig(this.ctx.dfs, this.ctx.layout.root, checked);
      return checked;
    });
  }

  /** Host path of a deployment's tree. */
  treePath(id: string): string {
    return this.ctx.layout.tree(id);
  }
}
