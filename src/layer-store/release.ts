import { tempNameIn } from '../fs/core/temp-names.js';
import { readLink } from '../fs/core/host-paths.js';
import type { LayerStore } from './store.js';

export interface ReleaseResult {
  /** diff_ids of the layers removed. */
  layers: string[];
  /** Objects removed (no layer left refers to them). */
  objects: number;
}

/**
 * Releases every layer that no deployment uses any more: a mark-sweep from `keep`, the
 * diff_ids of the layers the remaining deployments record (the caller reads them from
 * its deployments' records, e.g. after a prune). Each other layer's directory is first
 * renamed under tmp/ (durably: from then on it is a leftover no import trusts, removed
 * even if this is cut short), its compressed-digest links removed, then every object
 * that no kept layer's index names is removed. A deployment tree linked from a removed
 * object keeps its inode: only the store's name goes. Memory: the kept layers' object
 * keys. Run under the sysroot's writer lock (no import at the same time).
 */
export function releaseLayers(store: LayerStore, keep: readonly string[]): ReleaseResult {
  store.prepare();
  const kept = new Set(keep);
  const res: ReleaseResult = { layers: [], objects: 0 };
  const layers = store.layers();
  for (const l of layers) {
    if (kept.has(l.record.diffId)) continue;
    for (const d of l.record.digests) if (readLink(store.blobLink(d)) !== null) store.dfs.unlinkDurably(store.blobLink(d));
    const gone = tempNameIn(store.tmpDir);
    store.dfs.rename(l.dir, gone);
    store.dfs.removeTree(gone);
    res.layers.push(l.record.diffId);
  }
  // Mark and sweep: every object no kept layer names.
  res.objects = store.sweepObjects(layers.filter((l) => kept.has(l.record.diffId)));
  return res;
}
