import { makeContext, type Context, type ContextOptions } from './context.js';
import { StagedrootError } from './errors.js';
import { boot, markGood, type BootResult } from './boot/boot.js';
import { finalize, type FinalizeOptions, type FinalizeResult } from './commit/finalize.js';
import { applyTransition } from './store/apply-transition.js';
import { emptyTrash } from './store/remove-deployments.js';
import type { PathChange } from './fs/diff-manifests.js';
import { exists, readLink } from './fs/durable.js';
import { acquireLock } from './fs/lock.js';
import type { Drift } from './fs/verify-tree.js';
import { runTreeTask, warmTreeWorker } from './fs/tree-jobs.js';
import { storageKind, type StorageKind } from './fs/storage.js';
import { discardStaged, prune } from './gc/prune.js';
import { markBad, rollback } from './rollback/rollback.js';
import { effectiveState, mustFind, setLocked, setPinned } from './state/model.js';
import { recover, type RecoveryReport } from './store/recover.js';
import type { BaseState, Phase } from './state/schema.js';
import { statusView, type Status } from './state/status.js';
import { loadState } from './store/state-file.js';
import { pathSource } from './sources/detect.js';
import { checkWaitSeconds } from './util/options.js';
import { specSource } from './sources/spec.js';
import { ignitionSource } from './sources/ignition/index.js';
import type { Source } from './sources/source.js';
import { initSysroot, type InitOptions } from './stage/init.js';
import { stage, type StageOptions, type StageResult } from './stage/stage.js';
import type { BuiltinOptions } from './validate/builtins.js';

export interface SysrootOptions extends ContextOptions {
  /** Seconds a writer waits for another writer's lock (0: fail at once with BUSY). */
  waitSeconds?: number;
  /**
   * Open for reading only: no recovery, no lock, nothing written (works on a read-only
   * sysroot). Reads still resolve an interrupted swap consistently; writers recover.
   */
  readOnly?: boolean;
  /** Built-in validators for every stage through this handle (a stage's own `builtins` win key by key). */
  builtins?: BuiltinOptions;
}

/** What `stage` accepts: a Source, a path (kind detected from content), or a spec object. */
export type StageInput = Source | string | { [key: string]: unknown };

function toSource(input: StageInput): Source {
  if (typeof input === 'string') return pathSource(input);
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new StagedrootError('USAGE', `stage() takes a path, a Source or an update spec object, got ${Array.isArray(input) ? 'an array' : input === null ? 'null' : typeof input}`, { option: 'source', value: input });
  }
  if (typeof (input as Source).plan === 'function' && typeof (input as Source).kind === 'string') return input as Source;
  if ('ignition' in input) return ignitionSource(input);
  return specSource(input);
}

/**
 * A sysroot: the deployments and their state. Writers take an inter-process lock and
 * run crash recovery first; readers (`status`, `diff`, `verify`) never take the lock and
 * never write.
 */
export class Sysroot {
  readonly ctx: Context;
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
    ctx.dfs.mkdir(ctx.layout.root);
    const lock = await acquireLock(ctx.layout.root, { waitSeconds, operation: 'init', faults: ctx.faults });
    try {
      await initSysroot(ctx, o);
    } finally {
      lock.release();
    }
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
    let actions: string[] = [];
    if (o.readOnly) return new Sysroot(ctx, waitSeconds, actions, o.builtins);
    try {
      const lock = await acquireLock(ctx.layout.root, { waitSeconds: 0, operation: 'open', faults: ctx.faults });
      try {
        actions = recover(ctx).actions;
      } finally {
        lock.release();
      }
    } catch (err) {
      if (!(err instanceof StagedrootError && err.code === 'BUSY')) throw err;
    }
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

  private async write<T>(operation: string, fn: (s: BaseState) => Promise<T> | T): Promise<T> {
    const lock = await acquireLock(this.ctx.layout.root, { waitSeconds: this.waitSeconds, operation, faults: this.ctx.faults });
    try {
      const { state } = recover(this.ctx);
      try {
        return await fn(state);
      } finally {
        // Deployments the operation dropped were moved to trash/: deleted now, off the event loop.
        await emptyTrash(this.ctx).catch((err: unknown) => this.ctx.warn(`could not empty trash/ (${(err as Error).message}); the next writer retries`));
      }
    } finally {
      lock.release();
    }
  }

  /**
   * Stages an update. Rejections throw a StagedrootError whose `isRejection` is true (exit 3).
   * (async, like `prune`: bad input rejects the promise rather than throwing synchronously)
   */
  async stage(input: StageInput, o: StageOptions = {}): Promise<StageResult> {
    const source = toSource(input);
    warmTreeWorker(); // its start overlaps the lock, recovery and the source's plan
    return this.write('stage', (s) => stage(this.ctx, s, source, { ...o, builtins: { ...this.builtins, ...o.builtins } }));
  }

  finalize(o: FinalizeOptions = {}): Promise<FinalizeResult> {
    return this.write('finalize', (s) => finalize(this.ctx, s, o));
  }

  boot(): Promise<BootResult> {
    return this.write('boot', (s) => boot(this.ctx, s));
  }

  markGood(): Promise<Status> {
    return this.write('mark-good', (s) => this.view(markGood(this.ctx, s)));
  }

  markBad(reason = 'marked bad', o: { phase?: Phase; output?: string } = {}): Promise<Status> {
    return this.write('mark-bad', (s) => this.view(markBad(this.ctx, s, reason, o.phase ?? 'health', o.output)));
  }

  rollback(o: { discardStaged?: boolean } = {}): Promise<Status> {
    return this.write('rollback', (s) => this.view(rollback(this.ctx, s, o)));
  }

  discardStaged(): Promise<{ removed: string }> {
    return this.write('discard', (s) => discardStaged(this.ctx, s));
  }

  async prune(o: { keep?: number } = {}): Promise<{ removed: string[] }> {
    const keep = o.keep ?? 3;
    if (!Number.isInteger(keep) || keep < 0) throw new StagedrootError('USAGE', `Expected --keep to be a non-negative integer, got ${String(o.keep)}`, { option: 'keep', value: o.keep });
    return this.write('prune', (s) => prune(this.ctx, s, keep));
  }

  pin(id: string, pinned = true): Promise<Status> {
    return this.write('pin', (s) => this.view(applyTransition(this.ctx, s, setPinned(s, id, pinned), 'pin')));
  }

  /** Finalization lock on the staged deployment (finalize leaves it until unlocked). */
  setFinalizationLock(locked: boolean): Promise<Status> {
    return this.write(locked ? 'lock' : 'unlock', (s) => this.view(applyTransition(this.ctx, s, setLocked(s, locked), locked ? 'lock' : 'unlock')));
  }

  /** Changed paths between two deployments, by manifest (compared on a worker thread). */
  async diff(a: string, b: string): Promise<PathChange[]> {
    const s = this.state();
    return runTreeTask('diffManifests', { a: this.manifestOf(s, a), b: this.manifestOf(s, b) });
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
    const drift = await runTreeTask('verifyTree', { tree: this.ctx.layout.tree(which), manifest: this.manifestOf(s, which) }, { onProgress: o.onProgress, signal: o.signal });
    return { id: which, drift };
  }

  /** Host path of a deployment's tree. */
  treePath(id: string): string {
    return this.ctx.layout.tree(id);
  }
}
