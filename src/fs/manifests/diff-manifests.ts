import { ManifestReader } from './manifest.js';
import { comparePaths } from '../core/paths.js';
import { compareEntry } from './verify-tree.js';
import type { ManifestEntry } from './manifest-line.js';

export interface PathChange {
  path: string;
  change: 'added' | 'removed' | 'modified';
  /** For modified: what differs (content, mode, owner, type, target). */
  what?: string[];
}

/** Differences between two manifests, in one streaming merge. */
export function diffManifests(a: string, b: string): PathChange[] {
  const out: PathChange[] = [];
  mergeManifests(a, b, (c) => out.push(c.change === 'modified' ? { path: c.path, change: c.change, what: c.what } : { path: c.path, change: c.change }));
  return out;
}

/** What changed from manifest `a` to manifest `b`, as a stage's delta: `b`'s entries of the added and modified paths, and the removed paths, in path order. */
export interface ManifestDelta {
  changed: ManifestEntry[];
  removed: string[];
}

/** The delta from one manifest to another, in the same streaming merge (the new entries as `b` has them: no second lookup of each path). */
export function manifestDelta(a: string, b: string): ManifestDelta {
  const out: ManifestDelta = { changed: [], removed: [] };
  mergeManifests(a, b, (c) => (c.change === 'removed' ? out.removed.push(c.path) : out.changed.push(c.entry!)));
  return out;
}

function mergeManifests(a: string, b: string, emit: (c: PathChange & { entry?: ManifestEntry }) => void): void {
  const ra = new ManifestReader(a);
  const rb = new ManifestReader(b);
  try {
    let x = ra.next();
    let y = rb.next();
    while (x !== null || y !== null) {
      const c = x === null ? 1 : y === null ? -1 : comparePaths(x.p, y.p);
      if (c < 0) {
        emit({ path: x!.p, change: 'removed' });
        x = ra.next();
      } else if (c > 0) {
        emit({ path: y!.p, change: 'added', entry: y! });
        y = rb.next();
      } else {
        const d = compareEntry(x!, y!);
        if (d.length > 0) emit({ path: x!.p, change: 'modified', what: d.map((k) => k.kind), entry: y! });
        x = ra.next();
        y = rb.next();
      }
    }
  } finally {
    ra.close();
    rb.close();
  }
}
