import type { ChangeOp, SharedContent } from '../changeset.js';
import { StagedrootError } from '../errors.js';
import { DurableFs } from '../fs/trees/durable.js';
import { isUnder } from '../fs/core/paths.js';
import { RootFs } from '../fs/trees/root-fs.js';
import type { FaultHook } from '../fs/core/faults.js';
import { sharedRootOf } from './config.js';
import type { SharedOp } from './ops.js';
import { applyOp } from '../apply-changes.js';

export interface SharedDivertOptions {
  shared: readonly string[];
  mode: SharedContent;
  /** The private tree (in the stage's work dir) that holds the update's entries under shared directories. */
  contentRoot: string;
  /** Host path of a live shared directory (read only here: a spec's removal of a missing path is refused now). */
  liveShared: (rel: string) => string;
  faults?: FaultHook;
  warn: (message: string) => void;
  /** The content tree to write instead (a dry run's overlay): contentRoot is then not created. */
  content?: RootFs;
}

/**
 * The one place a stage turns a source's entries under shared directories (var/) into
 * what finalize applies: `stage` never writes a shared directory, nor the mount point in
 * the tree. Any source gets this for free through its change set (`sharedContent` says
 * whether its entries are initial content or desired state). Entries are written into a
 * private content tree through the safe-fs layer (same path checks as the deployment's
 * tree) and recorded as SharedOps.
 */
export class SharedDivert {
  readonly ops: SharedOp[] = [];
  private content: RootFs | null;

  constructor(private readonly o: SharedDivertOptions) {
    this.content = o.content ?? null;
  }

  private root(): RootFs {
    if (this.content === null) {
      new DurableFs(this.o.faults).mkdir(this.o.contentRoot);
      this.content = new RootFs(this.o.contentRoot, { faults: this.o.faults, durability: 'deferred' });
    }
    return this.content;
  }

  /**
   * Handles `op` when it is under a shared directory (returns its bytes), else null.
   * Where the op lands is resolved in the tree first: a write to home/core/x goes
   * through the tree's `home -> var/home` into var/home/core/x, machine state.
   */
  async divert(op0: ChangeOp, tree: RootFs, mode: SharedContent = this.o.mode): Promise<number | null> {
    if (this.o.shared.length === 0) return null;
    const real = op0.op === 'clear' && /^\/*$/.test(op0.path) ? '' : tree.realPath(op0.path, op0.op === 'mkdir');
    const shared = sharedRootOf(real, this.o.shared);
    if (shared === null) return null;
    const op: ChangeOp = op0.op === 'hardlink' ? { ...op0, path: real, target: tree.realPath(op0.target) } : { ...op0, path: real };
    const desired = mode === 'desired';
    if (op.path === shared) {
      // The mount point itself: its attributes belong to the tree; it stays a directory.
      if (op.op === 'mkdir' || op.op === 'setattr') return null;
      if (op.op === 'clear' || (op.op === 'remove' && !desired)) return 0;
      throw new StagedrootError('APPLY_FAILED', `${op.path} is a shared directory (machine state bound into every deployment): an update cannot ${op.op === 'remove' ? 'remove it' : `replace it with a ${op.op === 'write' ? 'file' : 'link'}`}`, { path: op.path });
    }
    switch (op.op) {
      case 'write':
        if (op.append) {
          throw new StagedrootError('SOURCE_UNSUPPORTED', `${op.path} is under the shared directory ${shared}: appending to machine state is not supported (write the whole file)`, { path: op.path });
        }
        return this.put(op, op.overwrite === false, mode);
      case 'mkdir':
      case 'symlink':
        return this.put(op, op.op === 'symlink' && op.overwrite === false, mode);
      case 'hardlink':
        if (!isUnder(op.target, shared)) {
          if (!desired) {
            this.o.warn(`skipped ${op.path}: a hard link from the shared directory ${shared} to ${op.target} outside it`);
            return 0;
          }
          throw new StagedrootError('APPLY_FAILED', `${op.path} is under the shared directory ${shared} but links to ${op.target} outside it`, { path: op.path });
        }
        return this.put(op, op.overwrite === false, mode);
      case 'remove':
        // An image never deletes state (whiteouts under var/ mean nothing there).
        if (!desired) return 0;
        if (!op.missingOk && !this.liveHas(shared, op.path)) {
          throw new StagedrootError('APPLY_FAILED', `Cannot remove ${op.path}: it does not exist (in the shared directory ${shared})`, { path: op.path, errno: 'ENOENT' });
        }
        this.root().remove(op.path, { recursive: true, missingOk: true });
        this.ops.push({ op: 'remove', path: op.path, when: 'always' });
        return 0;
      case 'clear':
        return 0;
      case 'setattr':
        if (this.root().lstat(op.path) !== null) await applyOp(this.root(), op);
        return 0;
    }
  }

  private async put(op: ChangeOp, absentOnly: boolean, mode: SharedContent): Promise<number> {
    const n = await applyOp(this.root(), op);
    this.ops.push({ op: 'put', path: op.path, when: mode === 'initial' || absentOnly ? 'absent' : 'always' });
    return n;
  }

  private liveHas(shared: string, p: string): boolean {
    try {
      return new RootFs(this.o.liveShared(shared)).lstat(p.slice(shared.length + 1)) !== null;
    } catch (err) {
      if (err instanceof StagedrootError && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return false;
      throw err;
    }
  }
}
