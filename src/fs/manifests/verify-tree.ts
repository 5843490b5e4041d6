import { ManifestReader, entryFromStat, readEntry, typeName } from './manifest.js';
import type { ManifestEntry } from './manifest-line.js';
import { comparePaths } from '../core/paths.js';
import { walkTree } from '../core/walk.js';

export type DriftKind = 'missing' | 'extra' | 'type' | 'content' | 'mode' | 'owner' | 'target' | 'xattrs';

export interface Drift {
  path: string;
  kind: DriftKind;
  expected?: string;
  actual?: string;
}

/** Compares one manifest entry with what is on disk now. */
export function compareEntry(want: ManifestEntry, have: ManifestEntry): Drift[] {
  const out: Drift[] = [];
  if (want.t !== have.t) return [{ path: want.p, kind: 'type', expected: typeName(want.t), actual: typeName(have.t) }];
  if (want.m !== have.m) out.push({ path: want.p, kind: 'mode', expected: want.m.toString(8).padStart(4, '0'), actual: have.m.toString(8).padStart(4, '0') });
  if (want.u !== have.u || want.g !== have.g) out.push({ path: want.p, kind: 'owner', expected: `${want.u}:${want.g}`, actual: `${have.u}:${have.g}` });
  if (want.t === 'f' && (want.s !== have.s || want.h !== have.h)) out.push({ path: want.p, kind: 'content', expected: `sha256:${want.h} (${want.s} bytes)`, actual: `sha256:${have.h} (${have.s} bytes)` });
  if (want.t === 'l' && want.l !== have.l) out.push({ path: want.p, kind: 'target', expected: want.l, actual: have.l });
  // Extended attributes (capabilities, labels, ACLs) are compared by digest.
  if (want.x !== have.x) out.push({ path: want.p, kind: 'xattrs', expected: want.x === undefined ? 'none' : `digest ${want.x}`, actual: have.x === undefined ? 'none' : `digest ${have.x}` });
  return out;
}

/** Verifies a tree against its manifest in one walk, streaming the manifest alongside. */
export function verifyTree(tree: string, manifest: string, opts: { onProgress?: (done: number) => void; checkAbort?: () => void } = {}): Drift[] {
  const drift: Drift[] = [];

  const r = new ManifestReader(manifest);
  try {
    let done = 0;
    walkTree(tree, {
      enter(rel, host, st) {
        opts.checkAbort?.();
        for (let e = r.peek(); e !== null && comparePaths(e.p, rel) < 0; e = r.peek()) {
          drift.push({ path: e.p, kind: 'missing', expected: typeName(e.t) });
          r.next();
        }
        const e = r.peek();
        if (e !== null && e.p === rel) {
          r.next();
          drift.push(...compareEntry(e, readEntry(rel, host, st)));
        } else {
          drift.push({ path: rel, kind: 'extra', actual: typeName(entryFromStat(rel, st, {}).t) });
        }
        if (opts.onProgress && ++done % 1000 === 0) opts.onProgress(done);
      },
    });
    for (let e = r.next(); e !== null; e = r.next()) drift.push({ path: e.p, kind: 'missing', expected: typeName(e.t) });
  } finally {
    r.close();
  }
  return drift;
}
