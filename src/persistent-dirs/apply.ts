import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { copyOut } from '../fs/trees/copy-entry.js';
import { readText } from '../fs/core/host-paths.js';
import { readEntry } from '../fs/manifests/manifest.js';
import { RootFs } from '../fs/trees/root-fs.js';
import type { Layout } from '../state/layout.js';
import { sameEntry, type TypeConflict } from '../fs/manifests/same-entry.js';
import { sharedRootOf } from './config.js';
import { parseSharedOps, type SharedOp } from './ops.js';

type Stats = NonNullable<ReturnType<RootFs['lstat']>>;

/** The update's entries under shared directories, checked against the live ones. */
export interface SharedPlan {
  ops: SharedOp[];
  /** Live paths whose version is kept aside before the update's replaces or removes it. */
  keep: { path: string; recursive: boolean }[];
  typeConflicts: TypeConflict[];
}

export function readSharedOps(layout: Layout, id: string): SharedOp[] {
  const text = readText(layout.sharedOps(id));
  return text === null ? [] : parseSharedOps(text, layout.sharedOps(id));
}

/** Where a shared path lives: the shared directory's root and the path inside it. */
function liveOf(layout: Layout, p: string, shared: readonly string[]): { root: RootFs; rel: string } {
  const d = sharedRootOf(p, shared);
  if (d === null || d === p) throw new StagedrootError('STATE_CORRUPT', `${p} is not inside a shared directory (${shared.join(', ')})`, { path: p });
  return { root: new RootFs(layout.shared(d)), rel: p.slice(d.length + 1) };
}

/** lstat inside a root; null when absent; 'blocked' when a parent is not a directory. */
function probe(root: RootFs, rel: string): { st: Stats | null; host: string } | 'blocked' {
  try {
    const r = root.resolve(rel);
    return { st: r.stat, host: r.hostPath };
  } catch (err) {
    if (err instanceof StagedrootError && err.errno === 'ENOENT') return { st: null, host: '' };
    if (err instanceof StagedrootError && err.errno === 'ENOTDIR') return 'blocked';
    throw err;
  }
}

const typeName = (st: Stats): string => (st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : st.isFile() ? 'file' : 'special file');

/**
 * Checks an update's desired entries under shared directories against the live ones
 * (at stage, and again at finalize): a desired file or link where the live directory
 * has a directory (or where a parent is not a directory) cannot be applied without
 * discarding state, a type conflict; every other live version the update replaces or
 * removes is kept aside. Initial content (`when: absent`) never conflicts.
 */
export function planShared(layout: Layout, id: string, shared: readonly string[], contentRoot = layout.sharedContent(id), ops = readSharedOps(layout, id)): SharedPlan {
  const plan: SharedPlan = { ops, keep: [], typeConflicts: [] };
  const content = new RootFs(contentRoot);
  const seen = new Set<string>();
  for (const op of ops) {
    if (op.when === 'absent') continue;
    const { root, rel } = liveOf(layout, op.path, shared);
    const live = probe(root, rel);
    if (live === 'blocked') {
      plan.typeConflicts.push({ path: op.path, local: 'a parent that is not a directory', update: op.op === 'put' ? 'an entry' : 'a removal' });
      continue;
    }
    if (live.st === null || seen.has(op.path)) continue;
    if (op.op === 'remove') {
      plan.keep.push({ path: op.path, recursive: true });
      seen.add(op.path);
      continue;
    }
    const want = content.resolve(op.path);
    if (want.stat === null) continue; // removed again later in the same update
    if (!want.stat.isDirectory() && live.st.isDirectory()) {
      plan.typeConflicts.push({ path: op.path, local: 'directory', update: typeName(want.stat) });
      continue;
    }
    if (want.stat.isDirectory() && live.st.isDirectory()) continue; // attributes only
    if (!sameEntry(readEntry(op.path, live.host, live.st), readEntry(op.path, want.hostPath, want.stat))) {
      plan.keep.push({ path: op.path, recursive: false });
      seen.add(op.path);
    }
  }
  return plan;
}

/** Copies the live versions the update replaces to kept/ID.partial/PATH (live state unchanged). */
export function keepSharedVersions(ctx: Context, id: string, plan: SharedPlan, shared: readonly string[]): void {
  for (const k of plan.keep) {
    const { root, rel } = liveOf(ctx.layout, k.path, shared);
    const live = probe(root, rel);
    if (live === 'blocked' || live.st === null) continue;
    copyOut(live.host, `${ctx.layout.kept(id, true)}/${k.path}`, { recursive: k.recursive, faults: ctx.faults });
  }
}

/**
 * Applies the update's entries to the live shared directories, in order (after the
 * pointer swap; recovery repeats it after a crash, so every step is idempotent).
 * Initial content goes only where nothing is; desired state is written over what is
 * there (kept aside before the swap). A live directory is never replaced by a file here.
 */
export function applySharedOps(ctx: Context, id: string, shared: readonly string[]): void {
  const { layout } = ctx;
  const content = new RootFs(layout.sharedContent(id));
  const cleaned = new Set<string>();
  for (const op of readSharedOps(layout, id)) {
    const d = sharedRootOf(op.path, shared);
    if (d === null || d === op.path) continue;
    const root = new RootFs(layout.shared(d), { faults: ctx.faults });
    const rel = op.path.slice(d.length + 1);
    // A write killed part-way (this is repeated after a crash) left a temp file beside its path.
    const parent = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
    if (!cleaned.has(`${d}/${parent}`)) {
      cleaned.add(`${d}/${parent}`);
      root.removeTempLeftovers(parent);
    }
    const live = probe(root, rel);
    if (op.op === 'remove') {
      if (live !== 'blocked') root.remove(rel, { recursive: true, missingOk: true });
      continue;
    }
    const want = content.resolve(op.path);
    if (want.stat === null || live === 'blocked') continue;
    if (live.st !== null && (op.when === 'absent' || (live.st.isDirectory() && !want.stat.isDirectory()))) continue;
    root.copyIn(rel, want.hostPath, { replace: true });
  }
}

/** Clears var/.updated (systemd's ConditionNeedsUpdate= stamp) in the shared var. */
export function clearSharedStamps(ctx: Context, shared: readonly string[]): void {
  if (!shared.includes('var')) return;
  new RootFs(ctx.layout.shared('var'), { faults: ctx.faults }).remove('.updated', { missingOk: true });
}
