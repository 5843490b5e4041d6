import { lstatOrNull } from '../fs/trees/copy-entry.js';
import { ManifestIndex } from '../fs/manifests/manifest-index.js';
import { ManifestReader, readEntry, unchangedSince } from '../fs/manifests/manifest.js';
import type { ManifestEntry } from '../fs/manifests/manifest-line.js';
import { sameEntry } from '../fs/manifests/same-entry.js';
import { hostPath } from '../fs/core/names.js';
import { comparePaths, isUnder } from '../fs/core/paths.js';
import { walkTree } from '../fs/core/walk.js';

/**
 * The rows of the /etc 3-way merge (see src/merge/plan.ts): for a path under a merged
 * directory, its entry in the booted deployment's manifest (`b`), in the staged one's
 * (`n`), and in the running system's live tree (`l`). Reading them is tree work and
 * lives here, so that it can run as a tree task on a worker thread; deciding what they
 * mean is the planner's.
 */
export interface Row {
  p: string;
  b: ManifestEntry | null;
  n: ManifestEntry | null;
  l: ManifestEntry | null;
}

type Stats = NonNullable<ReturnType<typeof lstatOrNull>>;

/** Thrown inside forEachRow's walk to stop it at its limit. */
const PAST_LIMIT = Symbol('past the limit');

export interface RowSources {
  /** The merged directory, tree-relative ("etc"). */
  dir: string;
  /** The booted deployment's manifest (its pristine tree). */
  baseManifest: string;
  /** The staged deployment's manifest. */
  newManifest: string;
  /** The booted deployment's live tree (the running system's root). */
  liveTree: string;
}

/** The next entry of `r` under `dir` (entries before it skipped unparsed), without consuming it; null past it. */
function peekUnder(r: ManifestReader, dir: string): ManifestEntry | null {
  for (;;) {
    const raw = r.peekRaw();
    if (raw === null) return null;
    if (comparePaths(raw.p, dir) < 0) {
      r.nextRaw();
      continue;
    }
    return isUnder(raw.p, dir) ? r.entryOf(raw) : null;
  }
}

/**
 * Streams the rows of one merged directory in manifest order: the two manifests read
 * alongside one walk of the live directory (only the merged directory is walked). A live
 * file is hashed unless it is the very inode the booted manifest recorded, unchanged
 * since (size, mtime, inode number and ctime, see unchangedSince): then its entry is the
 * recorded one. Size and mtime alone would not do (`cp -p` and `touch -r` keep them, and
 * a wrong "unchanged" here loses a local edit); every write, chmod, chown or attribute
 * change moves the ctime, which no user can set. Memory follows the directory's depth,
 * not its size. With a `limit`, the walk stops at the live entry past it and returns
 * false (the rows given so far are not all of them); true when it went through.
 */
export function forEachRow(o: RowSources, fn: (row: Row) => void, limit = Infinity): boolean {
  const rb = new ManifestReader(o.baseManifest);
  const rn = new ManifestReader(o.newManifest);
  const take = (r: ManifestReader, p: string): ManifestEntry | null => (peekUnder(r, o.dir)?.p === p ? r.next() : null);
  /** Rows of paths only the manifests have, before `p` (all of them when `p` is null). */
  const flushBefore = (p: string | null): void => {
    for (;;) {
      const b = peekUnder(rb, o.dir);
      const n = peekUnder(rn, o.dir);
      const x = b === null ? n?.p : n === null ? b.p : comparePaths(b.p, n.p) <= 0 ? b.p : n.p;
      if (x === undefined || (p !== null && comparePaths(x, p) >= 0)) return;
      fn({ p: x, b: take(rb, x), n: take(rn, x), l: null });
    }
  };
  let live = 0;
  const visit = (rel: string, host: string | Buffer, st: Stats): void => {
    if (++live > limit) throw PAST_LIMIT;
    flushBefore(rel);
    const b = take(rb, rel);
    const n = take(rn, rel);
    fn({ p: rel, b, n, l: unchangedSince(b, st) ? b : readEntry(rel, host, st) });
  };
  try {
    const host = `${o.liveTree}/${o.dir}`;
    const st = lstatOrNull(host);
    if (st !== null) {
      visit(o.dir, host, st);
      if (st.isDirectory()) walkTree(host, { enter: (rel, h, s) => visit(`${o.dir}/${rel}`, h, s) });
    }
    flushBefore(null);
    return true;
  } catch (err) {
    if (err === PAST_LIMIT) return false;
    throw err;
  } finally {
    rb.close();
    rn.close();
  }
}

/**
 * The rows of one merged directory where the live entry differs from the staged one
 * (`l` ≠ `n`), plus the rows of the paths in `always`: the only rows the planner acts
 * on (it passes over a row with `l` = `n`, see MergePlanner.add), so what crosses from a
 * worker thread follows the local changes and the update, not the directory's size.
 */
export function changedRows(o: RowSources & { always: readonly string[] }): Row[] {
  return changedRowsUpTo(o, Infinity)!;
}

/** changedRows of a directory with at most `limit` live entries; null (the walk stopped there) for a larger one. */
export function changedRowsUpTo(o: RowSources & { always: readonly string[] }, limit: number): Row[] | null {
  const always = new Set(o.always);
  const rows: Row[] = [];
  const whole = forEachRow(
    o,
    (r) => {
      if (!sameEntry(r.l, r.n) || always.has(r.p)) rows.push(r);
    },
    limit,
  );
  return whole ? rows : null;
}

/**
 * The rows of the given paths only (each under `dir`), in manifest order: `b` and `n`
 * found by binary search in the manifests (see ManifestIndex), `l` read from the live
 * tree as the walk of forEachRow would see it (absent below a live non-directory or
 * symlink). O(paths), whatever the size of the tree.
 */
export function lookupRows(o: RowSources & { paths: readonly string[] }): Row[] {
  const base = new ManifestIndex(o.baseManifest);
  const next = new ManifestIndex(o.newManifest);
  const stats = new Map<string, Stats | null>();
  /** The live stat of `p`, null when absent or when an ancestor below `dir` is not a directory. */
  const live = (p: string): Stats | null => {
    let st = stats.get(p);
    if (st !== undefined) return st;
    const parent = p === o.dir ? null : p.slice(0, p.lastIndexOf('/'));
    if (parent !== null && live(parent)?.isDirectory() !== true) st = null;
    else st = lstatOrNull(hostPath(o.liveTree, p));
    stats.set(p, st);
    return st;
  };
  try {
    return [...new Set(o.paths)]
      .filter((p) => isUnder(p, o.dir))
      .sort(comparePaths)
      .map((p) => {
        const b = base.find(p);
        const n = next.find(p);
        const st = live(p);
        return { p, b, n, l: st === null ? null : readEntry(p, hostPath(o.liveTree, p), st) };
      });
  } finally {
    base.close();
    next.close();
  }
}

/**
 * Every live entry strictly below `paths` (each tree-relative, under `liveTree`) that is a
 * directory in the live tree, in walk order: the rows a removal or a non-directory of the
 * update decides below it (see MergePlanner's 'ancestor'). O(those subtrees).
 */
export function livePathsBelow(liveTree: string, paths: readonly string[]): string[] {
  const out: string[] = [];
  // Each component a directory itself, never one reached through a symlink (as lookupRows and the walk see the tree).
  const isRealDir = (p: string): boolean => p.split('/').every((_, i, parts) => lstatOrNull(hostPath(liveTree, parts.slice(0, i + 1).join('/')))?.isDirectory() === true);
  for (const p of paths) {
    if (!isRealDir(p)) continue;
    walkTree(hostPath(liveTree, p), { enter: (rel) => void out.push(`${p}/${rel}`) });
  }
  return out;
}
