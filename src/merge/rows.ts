import { lstatOrNull } from '../fs/copy-entry.js';
import { ManifestReader, readEntryCached, type ManifestEntry } from '../fs/manifest.js';
import { comparePaths, isUnder } from '../fs/paths.js';
import { walkTree } from '../fs/walk.js';
import type { Row } from './plan.js';

type Stats = NonNullable<ReturnType<typeof lstatOrNull>>;

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

/** The next entry of `r` under `dir` (entries before it skipped), without consuming it; null past it. */
function peekUnder(r: ManifestReader, dir: string): ManifestEntry | null {
  for (;;) {
    const e = r.peek();
    if (e === null) return null;
    if (comparePaths(e.p, dir) < 0) {
      r.next();
      continue;
    }
    return isUnder(e.p, dir) ? e : null;
  }
}

/**
 * Streams the rows of one merged directory in manifest order: the two manifests read
 * alongside one walk of the live directory (only the merged directory is walked; a live
 * file is hashed only when its size or mtime differs from both manifests). Memory
 * follows the directory's depth, not its size.
 */
export function forEachRow(o: RowSources, fn: (row: Row) => void): void {
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
  const visit = (rel: string, host: string | Buffer, st: Stats): void => {
    flushBefore(rel);
    const b = take(rb, rel);
    const n = take(rn, rel);
    fn({ p: rel, b, n, l: readEntryCached(rel, host, st, [b, n]) });
  };
  try {
    const host = `${o.liveTree}/${o.dir}`;
    const st = lstatOrNull(host);
    if (st !== null) {
      visit(o.dir, host, st);
      if (st.isDirectory()) walkTree(host, { enter: (rel, h, s) => visit(`${o.dir}/${rel}`, h, s) });
    }
    flushBefore(null);
  } finally {
    rb.close();
    rn.close();
  }
}
