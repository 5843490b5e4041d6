import { ManifestReader } from './manifest.js';
import { comparePaths } from '../core/paths.js';
import { compareEntry } from './verify-tree.js';

export interface PathChange {
  path: string;
  change: 'added' | 'removed' | 'modified';
  /** For modified: what differs (content, mode, owner, type, target). */
  what?: string[];
}

/** Differences between two manifests, in one streaming merge. */
export function diffManifests(a: string, b: string): PathChange[] {
  const ra = new ManifestReader(a);
  const rb = new ManifestReader(b);
  const out: PathChange[] = [];
  try {
    let x = ra.next();
    let y = rb.next();
    while (x !== null || y !== null) {
      const c = x === null ? 1 : y === null ? -1 : comparePaths(x.p, y.p);
      if (c < 0) {
        out.push({ path: x!.p, change: 'removed' });
        x = ra.next();
      } else if (c > 0) {
        out.push({ path: y!.p, change: 'added' });
        y = rb.next();
      } else {
        const d = compareEntry(x!, y!);
        if (d.length > 0) out.push({ path: x!.p, change: 'modified', what: d.map((k) => k.kind) });
        x = ra.next();
        y = rb.next();
      }
    }
  } finally {
    ra.close();
    rb.close();
  }
  return out;
}
