import { ManifestCursor } from './manifest-cursor.js';
import { isUnder } from '../core/paths.js';

/**
 * Sums the sizes of a manifest's regular files outside `prefixes`, in one streaming
 * pass that decodes only the lines outside them: the runs under a prefix (usr/, most of
 * a tree) are passed over as bytes (ManifestCursor.skipRun). It runs before every stage.
 */
export function sumFileSizes(manifest: string, prefixes: readonly string[]): number {
  const c = new ManifestCursor(manifest);
  let sum = 0;
  try {
    for (let r = c.peekRaw(); r !== null; r = c.peekRaw()) {
      const under = prefixes.find((p) => r.p !== p && isUnder(r.p, p));
      if (under !== undefined && c.skipRun(under, null) > 0) continue;
      c.nextRaw();
      if (prefixes.some((p) => isUnder(r.p, p))) continue;
      const e = c.entryOf(r);
      if (e.t === 'f') sum += e.s ?? 0;
    }
  } finally {
    c.close();
  }
  return sum;
}
