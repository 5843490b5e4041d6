import { createHash } from 'node:crypto';
import type { ChangeOp, ChangeSet, Content } from '../changeset.js';
import type { Context } from '../context.js';
import { StagedrootError, type Issue } from '../errors.js';
import type { PathChange } from '../fs/manifests/diff-manifests.js';
import { hashFile } from '../fs/core/hash.js';
import { comparePaths } from '../fs/core/paths.js';
import { readTree } from '../fs/trees/read-tree.js';
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { snapshotsFrom } from '../fs/trees/storage.js';
import type { Source } from '../sources/source.js';
import { mustFind, stageBase } from '../state/model.js';
import type { BaseState, Origin, SignatureRecord } from '../state/schema.js';
import { resolveBuiltins, type BuiltinOptions } from '../validate/builtins.js';
import { checkFreeSpace, estimateBytes } from '../validate/free-space.js';
import { checkSource } from './check-source.js';
import { readConfigRecord } from '../store/config-record.js';
import { DEFAULT_COPY_POLICY } from './stage.js';
import { sharedDirs, sharedRootOf } from '../machine-state/config.js';

export interface DryRunOptions {
  label?: string;
  builtins?: BuiltinOptions;
  signature?: string;
}

export interface DryRunResult {
  /** False when the stage would be rejected (the issues say why). */
  ok: boolean;
  /** The deployment the update would be built from (the booted one). */
  base: string;
  label: string;
  description?: string;
  /** What the update would add, remove and modify, in the `diff` format. */
  changes: PathChange[];
  issues: Issue[];
  /** The image is what the booted deployment already runs: a stage would do nothing. */
  alreadyRunning?: boolean;
  origin?: Origin;
  signature?: SignatureRecord | null;
}

type Kind = 'file' | 'dir' | 'symlink' | 'other';

/**
 * Plans a stage without building a tree and without writing or recording anything: the
 * signature and image checks, the source's own checks (schema, unsupported fields,
 * hostile entries: everything a source's plan rejects), the free-space preflight, then
 * the change set walked over the booted tree as it would be applied, which finds what
 * a stage would add, modify and remove and the conflicts (a parent path that is a
 * regular file, `overwrite: false` over an existing path). Validators that need the new
 * tree (systemd units, required paths) are not run. The cost follows the update: only
 * the paths it names are looked up (and the subtrees it removes listed).
 */
export async function dryRun(ctx: Context, state: BaseState, source: Source, o: DryRunOptions = {}): Promise<DryRunResult> {
  const { layout } = ctx;
  const base = mustFind(state, stageBase(state));
  const result: DryRunResult = { ok: true, base: base.id, label: o.label ?? 'update', changes: [], issues: [] };
  const reject = (err: unknown): DryRunResult => {
    if (!(err instanceof StagedrootError) || err.code === 'USAGE' || !(err.isRejection || err.code === 'NO_SPACE')) throw err;
    result.ok = false;
    result.issues.push(...(err.issues.length ? err.issues.filter((i) => i.severity === 'error') : []));
    if (err.issues.length === 0 || !result.issues.length) result.issues.push({ code: err.code, path: err.path ?? '', message: err.message, severity: 'error' });
    return result;
  };
  const builtins = resolveBuiltins(o.builtins);
  let cs: ChangeSet;
  try {
    const checked = await checkSource(layout, source, { signature: o.signature });
    result.signature = checked.signature;
    if (checked.info.origin) result.origin = checked.info.origin;
    result.label = o.label ?? checked.info.label ?? result.label;
    if (checked.info.origin !== undefined && !checked.info.withConfig && base.origin?.digest === checked.info.origin.digest) return { ...result, alreadyRunning: true };
    cs = await source.plan(new ReadOnlyTree(layout.tree(base.id)), { config: readConfigRecord(layout.deployment(base.id)), ...(base.origin ? { origin: base.origin } : {}) });
  } catch (err) {
    return reject(err);
  }
  result.label = o.label ?? cs.label ?? result.label;
  result.description = cs.description;
  if (builtins.freeSpace) {
    try {
      checkFreeSpace(layout.root, await estimateBytes(layout.manifest(base.id), DEFAULT_COPY_POLICY.hardlinkPrefixes, cs, { snapshot: snapshotsFrom(layout.root, ctx.storage, layout.tree(base.id)) }), builtins.freeSpace);
    } catch (err) {
      reject(err);
    }
  }
  try {
    // Entries under shared directories never change the tree (finalize applies them to the
    // shared directory), and the mount point itself stays: only the tree's changes are listed.
    const shared = sharedDirs(state);
    const sim = new Simulation(layout.tree(base.id));
    for await (const op of cs.ops as AsyncIterable<ChangeOp>) {
      const under = sharedRootOf(op.path, shared);
      if (under === null || (under === op.path && (op.op === 'mkdir' || op.op === 'setattr'))) await sim.apply(op);
    }
    result.changes = sim.changes().filter((c) => sharedRootOf(c.path, shared) === null);
    result.issues.push(...sim.issues);
    if (sim.issues.length) result.ok = false;
  } catch (err) {
    reject(err);
  }
  return result;
}

/** The change set applied to a map of the paths it touches, over the booted tree (read only). */
class Simulation {
  private readonly booted: ReadOnlyTree;
  /** path -> what it becomes (null: removed); absent: as in the booted tree. */
  private readonly overlay = new Map<string, Kind | null>();
  private readonly modified = new Map<string, Set<string>>();
  /** Directories cleared: booted paths below them are gone unless written again. */
  private readonly cleared = new Set<string>();
  readonly issues: Issue[] = [];

  constructor(private readonly root: string) {
    this.booted = new ReadOnlyTree(root);
  }

  private bootedKind(p: string): Kind | null {
    let st;
    try {
      st = this.booted.lstat(p);
    } catch {
      return null; // a parent is missing or not a directory: nothing there
    }
    if (st === null) return null;
    return st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
  }

  private kind(p: string): Kind | null {
    if (this.overlay.has(p)) return this.overlay.get(p)!;
    for (let a = parentOf(p); a !== null; a = parentOf(a)) {
      if (this.cleared.has(a)) return null;
      const k = this.overlay.get(a);
      if (k === null || (k !== undefined && k !== 'dir')) return null;
    }
    if (this.cleared.has('')) return null;
    return this.bootedKind(p);
  }

  private conflict(op: ChangeOp, message: string, errno: string): void {
    if (this.issues.length < 50) this.issues.push({ code: 'APPLY_FAILED', path: op.path, message: `${op.op} ${op.path}: ${message} (${errno})`, severity: 'error' });
  }

  /** Creating p needs its parents to be directories (or missing: they are created). */
  private parentsOk(op: ChangeOp): boolean {
    const missing: string[] = [];
    for (let a = parentOf(op.path); a !== null && a !== ''; a = parentOf(a)) {
      const k = this.kind(a);
      if (k === 'file' || k === 'other') {
        this.conflict(op, `its parent path ${a} is not a directory`, 'ENOTDIR');
        return false;
      }
      if (k === 'dir' || k === 'symlink') break;
      missing.push(a);
    }
    for (const a of missing) this.set(a, 'dir'); // created on the way
    return true;
  }

  private set(p: string, k: Kind | null, what?: string): void {
    this.overlay.set(p, k);
    if (what) (this.modified.get(p) ?? this.modified.set(p, new Set()).get(p)!).add(what);
  }

  /** Every booted path below p (a removed or cleared directory), as removed. */
  private removeBelow(p: string): void {
    if (p !== '' && this.bootedKind(p) !== 'dir') return;
    for (const e of readTree(p === '' ? this.root : `${this.root}/${p}`)) {
      const q = p === '' ? e.rel : `${p}/${e.rel}`;
      if (!this.overlay.has(q)) this.overlay.set(q, null);
    }
  }

  async apply(op: ChangeOp): Promise<void> {
    const before = this.kind(op.path);
    switch (op.op) {
      case 'write':
      case 'symlink':
      case 'hardlink': {
        if (!this.parentsOk(op)) return;
        if (before !== null && op.overwrite === false && !op.replace) return this.conflict(op, 'the path exists and the update says overwrite: false', 'EEXIST');
        const now: Kind = op.op === 'symlink' ? 'symlink' : 'file';
        if (before === 'dir') this.removeBelow(op.path);
        // Compared with the booted tree, whatever this update did to the path before.
        const was = this.bootedKind(op.path);
        this.modified.delete(op.path);
        if (was === null) return this.set(op.path, now);
        if (was !== now) return this.set(op.path, now, 'type');
        if (op.op === 'write') return this.set(op.path, now, !op.append && (await this.sameContent(op.path, op.content)) ? undefined : 'content');
        if (op.op === 'symlink') return this.set(op.path, now, this.booted.readlink(op.path) === op.target ? undefined : 'target');
        return this.set(op.path, now, 'content');
      }
      case 'mkdir':
        if (!this.parentsOk(op)) return;
        if (before === 'dir') return;
        if (before !== null) this.removeBelow(op.path);
        return this.set(op.path, 'dir', this.bootedKind(op.path) === null || this.bootedKind(op.path) === 'dir' ? undefined : 'type');
      case 'remove':
        if (before === null) return;
        if (before === 'dir') this.removeBelow(op.path);
        return this.set(op.path, null);
      case 'clear':
        if (before !== 'dir' && op.path !== '') return;
        this.removeBelow(op.path);
        for (const [p, k] of this.overlay) if (k !== null && isBelow(p, op.path)) this.overlay.set(p, null);
        this.cleared.add(op.path);
        return;
      case 'setattr':
        if (before !== null && op.mode !== undefined && this.overlay.get(op.path) === undefined) {
          const st = this.booted.lstat(op.path);
          if (st && (st.mode & 0o7777) !== op.mode) this.set(op.path, before, 'mode');
        }
        return;
    }
  }

  /** Whether new content equals the booted file's (only read when the sizes agree). */
  private async sameContent(p: string, c: Content): Promise<boolean> {
    const st = this.booted.lstat(p);
    if (!st?.isFile()) return false;
    if (c.kind === 'bytes') return c.data.length === st.size && Buffer.compare(Buffer.from(c.data), this.booted.readFile(p)!) === 0;
    if (c.size !== undefined && c.size !== st.size) return false;
    const h = createHash('sha256');
    for await (const chunk of c.open()) h.update(chunk);
    return h.digest('hex') === hashFile(`${this.root}/${p}`);
  }

  changes(): PathChange[] {
    const out: PathChange[] = [];
    for (const [p, k] of this.overlay) {
      const was = this.bootedKind(p) !== null;
      if (k === null) {
        if (was) out.push({ path: p, change: 'removed' });
      } else if (!was) out.push({ path: p, change: 'added' });
      else {
        const what = this.modified.get(p);
        if (what) out.push({ path: p, change: 'modified', what: [...what] });
      }
    }
    return out.sort((a, b) => comparePaths(a.path, b.path));
  }
}

function parentOf(p: string): string | null {
  if (p === '') return null;
  const i = p.lastIndexOf('/');
  return i === -1 ? '' : p.slice(0, i);
}

function isBelow(p: string, dir: string): boolean {
  return dir === '' ? p !== '' : p.startsWith(dir + '/');
}
