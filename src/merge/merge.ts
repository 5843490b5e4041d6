import { z } from 'zod';
import type { Context } from '../context.js';
import { StagedrootError, type Issue } from '../errors.js';
import { copyOut, lstatOrNull } from '../fs/trees/copy-entry.js';
import { parseDelta } from '../fs/manifests/delta.js';
import { exists, readText } from '../fs/core/host-paths.js';
import { isUnder } from '../fs/core/paths.js';
import { displayPath, hostPath } from '../fs/core/names.js';
import { changedRows, changedRowsUpTo, livePathsBelow, lookupRows, type Row, type RowSources } from './merge-rows.js';
import { patchOverlay } from '../fs/manifests/patch-manifest.js';
import { overlayFile } from '../fs/manifests/manifest-overlay.js';
import { labelTouched } from '../fs/trees/selinux.js';
import { RootFs, type TouchEvent } from '../fs/trees/root-fs.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { rowTasks } from './row-tasks.js';
import type { Layout } from '../state/layout.js';
import { planMerge, rowsAlwaysPlanned, typeConflictPaths, type MergeAction, type TypeConflict, type UpdatePaths } from './plan.js';

/** The merge of every merged directory into one staged deployment. */
export interface PlannedMerge {
  /** The deployment whose manifest is the merge's base (what the running etc/ was deployed as). */
  booted: string;
  /** The deployment whose tree is the running root (booted, unless a live apply made another current). */
  running: string;
  staged: string;
  actions: MergeAction[];
  keep: string[];
  conflicts: { path: string; kept: boolean }[];
  typeConflicts: TypeConflict[];
  carried: number;
  /** A carry of later edits (NO_UPDATE): recovery redoes it the same way. */
  carry?: boolean;
}

/** What the update wrote and removed (its delta, recorded at stage). */
export function updatePaths(layout: Layout, id: string, file = layout.delta(id)): UpdatePaths {
  const text = readText(file);
  if (text === null) throw new StagedrootError('STATE_CORRUPT', `The delta of deployment ${id} is missing (${file})`, { path: file });
  const delta = parseDelta(text, file);
  return { changed: new Map(delta.changed.map((e) => [e.p, e.t])), removed: new Set(delta.removed) };
}

/** Where the rows of a merge come from: the two manifests and the live tree. */
interface MergeSources {
  update: UpdatePaths;
  sources: (dir: string) => RowSources;
}

/** Where a merge reads: `running` is the tree with the live etc/ (default: booted's); `update` what the update decides (default: its delta; none: every local change is carried). */
export interface MergeInputs {
  running?: string;
  update?: UpdatePaths;
}

/** An update that decides no path: the merge carries every local change (apply-live's carry of later edits). */
export const NO_UPDATE: UpdatePaths = { changed: new Map(), removed: new Set() };

function mergeSources(layout: Layout, booted: string, staged: string, where: { manifest: string; delta: string }, i: MergeInputs = {}): MergeSources {
  return {
    update: i.update ?? updatePaths(layout, staged, where.delta),
    sources: (dir) => ({ dir, baseManifest: layout.manifest(booted), newManifest: where.manifest, liveTree: layout.tree(i.running ?? booted) }),
  };
}

/** The plans of each merged directory, from their rows, as one merge. */
function combine(booted: string, running: string, staged: string, update: UpdatePaths, rows: { dir: string; rows: Row[] }[]): PlannedMerge {
  const out: PlannedMerge = { booted, running, staged, actions: [], keep: [], conflicts: [], typeConflicts: [], carried: 0 };
  for (const r of rows) {
    const p = planMerge(r.rows, update, r.dir);
    out.actions.push(...p.actions);
    out.keep.push(...p.keep);
    out.conflicts.push(...p.conflicts);
    out.typeConflicts.push(...p.typeConflicts);
    out.carried += p.carried;
  }
  return out;
}

const defaultWhere = (layout: Layout, staged: string): { manifest: string; delta: string } => ({ manifest: layout.manifest(staged), delta: layout.delta(staged) });

/**
 * Plans the merge of the booted deployment's local changes into the staged one: reads
 * the two manifests and walks the live merged directories; writes nothing. The walk of
 * a large directory runs on a worker thread (a tree task) and hands back only the rows
 * the planner acts on; a small one (INLINE_ROWS_MAX_ENTRIES) on the caller's thread
 * unless `{ thread: 'worker' }` asks for the worker whatever the size;
 * recovery, which runs synchronously when a sysroot is opened, walks on its own thread
 * (`{ thread: 'caller' }`): the same rows, the same plan.
 */
export function planEtcMerge(layout: Layout, booted: string, staged: string, merged: readonly string[], o: { thread: 'caller' } & MergeInputs): PlannedMerge;
export function planEtcMerge(layout: Layout, booted: string, staged: string, merged: readonly string[], o?: { thread?: 'worker' } & MergeInputs): Promise<PlannedMerge>;
export function planEtcMerge(layout: Layout, booted: string, staged: string, merged: readonly string[], o: { thread?: 'caller' | 'worker' } & MergeInputs = {}): PlannedMerge | Promise<PlannedMerge> {
  const m = mergeSources(layout, booted, staged, defaultWhere(layout, staged), o);
  const walks = merged.map((dir) => ({ ...m.sources(dir), always: rowsAlwaysPlanned(dir) }));
  const plan = (rows: Row[][]): PlannedMerge => ({ ...combine(booted, o.running ?? booted, staged, m.update, merged.map((dir, i) => ({ dir, rows: rows[i]! }))), ...(o.update === NO_UPDATE ? { carry: true } : {}) });
  if (o.thread === 'caller') return plan(walks.map((w) => changedRows(w)));
  return (async () => {
    const rows: Row[][] = [];
    // A small directory's rows in one walk here; a walk that passes the limit stops and the worker walks it whole.
    for (const w of walks) rows.push((o.thread === undefined ? changedRowsUpTo(w, INLINE_ROWS_MAX_ENTRIES) : null) ?? (await runTreeTask(rowTasks.changedRows, w)));
    return plan(rows);
  })();
}

/**
 * Up to how many live entries a merged directory's rows are read on the caller's thread
 * rather than on a worker. Starting the worker (a thread, its isolate, the bundle's
 * evaluation) costs ~200 ms of CPU on the benchmark host and 10-25x that under TCG
 * (BENCHMARKS.md, "Live apply against the reboot it replaces"), more than walking and
 * comparing a small etc/: the rows of a few thousand entries take less (an lstat each,
 * a hash only where the inode changed since the manifest recorded it). Above it the
 * walk goes to the worker as before, so that a library user's event loop is not held
 * for a large tree's walk: the walk here stops at the entry past the limit
 * (changedRowsUpTo), and the worker's walks the directory whole.
 */
export const INLINE_ROWS_MAX_ENTRIES = 4000;

/**
 * The type conflicts of the merge, as planEtcMerge would find them, from the rows of the
 * update's own paths and their ancestors only (see typeConflictPaths): O(update), not
 * O(tree), read on a worker thread. What stage refuses before anything is committed.
 * `update`: the delta as the stage holds it (default: read from `where.delta`).
 */
export async function etcTypeConflicts(layout: Layout, booted: string, staged: string, merged: readonly string[], where = defaultWhere(layout, staged), update?: UpdatePaths): Promise<TypeConflict[]> {
  const m = mergeSources(layout, booted, staged, where, update === undefined ? {} : { update });
  const out: TypeConflict[] = [];
  for (const dir of merged) {
    const paths = typeConflictPaths(m.update, dir);
    if (paths.length === 0) continue;
    const rows = await runTreeTask(rowTasks.lookupRows, { ...m.sources(dir), paths });
    out.push(...planMerge(rows, m.update, dir).typeConflicts);
  }
  return out;
}

/**
 * The merge a live apply makes into the staged tree before it writes the update into the
 * running root: the planner's rules (see plan.ts) over the rows of the paths the update
 * decides and of their ancestors (typeConflictPaths), of every live entry below a path it
 * removed or made a non-directory, and of the paths always planned (`etc/.updated`), read
 * on the caller's thread: O(update), not O(tree). On those paths it is the whole merge's
 * plan (every ancestor of a row is a row, so no action of a row left out can reach one):
 * the update wins, a local version it wins over is kept and reported, a type conflict
 * refuses. Every other local edit of the running tree stays there: the live apply leaves
 * it to the carry into the deployment it makes current (carryLiveEdits: at the next
 * finalize, or at the next boot after a crash), which carries every path where the running
 * tree differs from that deployment, the edits made before the apply as much as after it.
 */
export function planLiveMerge(layout: Layout, booted: string, staged: string, merged: readonly string[], running: string): PlannedMerge {
  const m = mergeSources(layout, booted, staged, defaultWhere(layout, staged), { running });
  const rows = merged.map((dir) => ({ dir, rows: lookupRows({ ...m.sources(dir), paths: liveMergePaths(m.update, dir, layout.tree(running)) }) }));
  return combine(booted, running, staged, m.update, rows);
}

/** The paths of a merged directory whose rows planLiveMerge plans (unsorted, may repeat: lookupRows sorts them once). */
export function liveMergePaths(update: UpdatePaths, dir: string, liveTree: string): string[] {
  const nonDirs = [...update.changed].filter(([p, t]) => t !== 'd' && isUnder(p, dir)).map(([p]) => p);
  const below = livePathsBelow(liveTree, [...[...update.removed].filter((p) => isUnder(p, dir)), ...nonDirs]);
  return [...typeConflictPaths(update, dir), ...rowsAlwaysPlanned(dir), ...below];
}

/** A type conflict as an issue (stage's MERGE_CONFLICT, finalize's failure record). */
export function conflictIssue(c: TypeConflict): Issue {
  return { code: 'MERGE_CONFLICT', path: c.path, message: `local ${c.local}, update ${c.update}`, severity: 'error' };
}

/** The marker of a merge in progress (deploy/ID/merging.json): recovery redoes it from this. */
const markerSchema = z.object({ booted: z.string(), running: z.string().optional(), carry: z.boolean().optional(), merged: z.array(z.string()), paths: z.array(z.string()) }).strict();
export type MergeMarker = z.infer<typeof markerSchema>;

export function readMarker(layout: Layout, id: string): MergeMarker | null {
  const text = readText(layout.mergeMarker(id));
  if (text === null) return null;
  try {
    return markerSchema.parse(JSON.parse(text));
  } catch (err) {
    throw new StagedrootError('STATE_CORRUPT', `${layout.mergeMarker(id)} is unreadable: ${(err as Error).message}`, { path: layout.mergeMarker(id), cause: err });
  }
}

/** Copies the local versions the update wins over to kept/ID.partial/PATH (the live tree is not changed). */
export function keepLocalVersions(ctx: Context, m: PlannedMerge): void {
  const { layout } = ctx;
  for (const p of m.keep) copyOut(hostPath(layout.tree(m.running), p), `${layout.kept(m.staged, true)}/${p}`, { faults: ctx.faults });
}

/** A merge written into the staged tree, its manifest not yet patched. */
interface WrittenMerge {
  tree: string;
  manifest: string;
  events: TouchEvent[];
}

/**
 * Writes the plan into the staged tree. The marker goes first (with every path the
 * merge touches), so that a crash part-way is redone by recovery. Returns what the
 * manifest's patch needs (every path touched, by this merge or an earlier one).
 */
function writeEtcMerge(ctx: Context, m: PlannedMerge, merged: readonly string[], earlier: readonly string[]): WrittenMerge {
  const { layout, dfs } = ctx;
  const paths = [...new Set([...earlier, ...m.actions.map((a) => a.path)])];
  const marker: MergeMarker = { booted: m.booted, ...(m.running === m.booted ? {} : { running: m.running }), ...(m.carry ? { carry: true } : {}), merged: [...merged], paths };
  dfs.writeFileAtomic(layout.mergeMarker(m.staged), JSON.stringify(marker) + '\n');
  const tree = layout.tree(m.staged);
  const live = layout.tree(m.running);
  const events: TouchEvent[] = [];
  const dropped = (rel: string, name: string, why: string): void => ctx.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`);
  const root = new RootFs(tree, { faults: ctx.faults, onTouch: (e) => events.push(e), xattrPolicy: ctx.xattrPolicy, onXattrDrop: dropped });
  for (const a of m.actions) {
    if (a.kind === 'carry' && lstatOrNull(hostPath(live, a.path)) !== null) {
      root.copyIn(a.path, hostPath(live, a.path), { replace: a.replace });
    } else {
      // Removed locally (or gone since it was planned, rpm-ostree#1791): the target is "absent".
      root.remove(a.path, { recursive: true, missingOk: true });
    }
  }
  // What the merge wrote without a label of its own (created parents, a local file from an
  // unlabelled tree) is labelled by the staged tree's policy; carried labels are kept.
  labelTouched(root, events, { policy: ctx.xattrPolicy, onDrop: dropped });
  // Every path the merge (or an earlier, interrupted one) touched is re-read into the manifest.
  for (const p of paths) {
    const st = lstatOrNull(hostPath(tree, p));
    events.push({ kind: st !== null && st.isDirectory() ? 'touch' : 'remove', path: p });
  }
  return { tree, manifest: layout.manifest(m.staged), events };
}

/**
 * Records what the merge wrote as the staged manifest's overlay (see manifest-overlay.ts):
 * O(changes in the merged directories), the manifest itself is not rewritten. The
 * overlay is written atomically (temp, fsync, rename, fsync of the directory), never
 * after an error, and before the state records its digest. Returns that digest.
 */
function recordMerge(ctx: Context, w: WrittenMerge, baseSha256: string | null): string {
  const o = patchOverlay(w.tree, w.manifest, w.events, baseSha256);
  ctx.dfs.writeFileAtomic(overlayFile(w.manifest), o.text);
  return o.digest;
}

/**
 * Writes the plan into the staged tree (see writeEtcMerge) and records it in its
 * manifest's overlay (see recordMerge). `baseSha256`: the staged manifest's digest as
 * the state records it. Returns the new digest.
 */
export function applyEtcMerge(ctx: Context, m: PlannedMerge, merged: readonly string[], baseSha256: string | null): string {
  return recordMerge(ctx, writeEtcMerge(ctx, m, merged, []), baseSha256);
}

/**
 * Completes a merge a crash interrupted in a deployment that is still staged: plans it
 * again from the live tree (type conflicts are left for the next finalize to refuse) and
 * applies it, re-reading every path the first attempt may have touched. Returns the new
 * manifest's digest. Synchronous: recovery runs when a sysroot is opened.
 */
export function redoEtcMerge(ctx: Context, id: string, marker: MergeMarker, baseSha256: string | null): string {
  const { layout } = ctx;
  if (!exists(layout.tree(marker.booted))) {
    throw new StagedrootError('STATE_CORRUPT', `An interrupted merge into ${id} came from deployment ${marker.booted}, whose tree is gone`, { path: layout.mergeMarker(id) });
  }
  // Writes the crash cut short left temp files beside the paths they were writing.
  const tree = new RootFs(layout.tree(id), { faults: ctx.faults });
  for (const dir of new Set(marker.paths.map((p) => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '')))) tree.removeTempLeftovers(dir);
  const m = planEtcMerge(layout, marker.booted, id, marker.merged, { thread: 'caller', ...(marker.running ? { running: marker.running } : {}), ...(marker.carry ? { update: NO_UPDATE } : {}) });
  return recordMerge(ctx, writeEtcMerge(ctx, m, marker.merged, marker.paths), baseSha256);
}
