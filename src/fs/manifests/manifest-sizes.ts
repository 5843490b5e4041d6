import { ManifestIndex } from './manifest-index.js';
import { comparePaths, isUnder } from '../core/paths.js';

/**
 * Sums the sizes of a manifest's regular files outside `prefixes` without reading the
 * lines under them: a manifest is sorted by comparePaths, so the lines strictly below a
 * prefix (usr/, most of a tree) are one stretch of the base file, found by two binary
 * searches (ManifestIndex.firstLineWhere); only the lines outside those stretches are
 * read and parsed, and the overlay's entries outside them added (a base line the
 * overlay replaces or removes is not counted; the overlay's lines under the prefixes are
 * not parsed). O(lines outside + log size). It runs
 * before every stage (the free-space preflight).
 */
export function sumFileSizes(manifest: string, prefixes: readonly string[]): number {
  const index = new ManifestIndex(manifest);
  try {
    const under = (p: string): boolean => prefixes.some((q) => isUnder(p, q));
    // The stretches below each prefix ('' is no prefix: isUnder holds for no path under it), merged.
    const skipped = prefixes
      .filter((q) => q !== '')
      .map((q) => ({ from: index.firstLineWhere((p) => comparePaths(p, q) > 0), to: index.firstLineWhere((p) => comparePaths(p, q) > 0 && !isUnder(p, q)) }))
      .filter((r) => r.from < r.to)
      .sort((a, b) => a.from - b.from);
    // The overlay's lines are parsed only outside the prefixes (a stage's overlay names
    // every path its updates wrote under usr/: hundreds to thousands of lines).
    const overlay = index.overlayLookup;
    let sum = 0;
    let at = 0;
    const count = (from: number, to: number): void => {
      for (const e of index.entriesBetween(from, to)) if (e.t === 'f' && !under(e.p) && !(overlay?.drops(e.p) ?? false)) sum += e.s ?? 0;
    };
    for (const r of skipped) {
      if (r.from > at) count(at, r.from);
      at = Math.max(at, r.to);
    }
    count(at, index.byteSize);
    for (const p of overlay?.paths() ?? []) {
      if (under(p)) continue;
      const e = overlay!.find(p)!;
      if (e.t === 'f') sum += e.s ?? 0;
    }
    return sum;
  } finally {
    index.close();
  }
}
