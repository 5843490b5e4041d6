import * as path from 'node:path';
import type { StorableLayer } from '../changeset.js';
import type { Context } from '../context.js';
import { isUnder } from '../fs/core/paths.js';
import type { CopyPolicy } from '../fs/trees/copy-tree.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { importLayer } from '../layer-store/import-layer.js';
import { layerStoreTasks } from '../layer-store/link-tree.js';
import { countStackOps, sharedPrefix, stackOps } from '../layer-store/stack-ops.js';
import { LayerStore } from '../layer-store/store.js';
import type { LayerLimits } from '../sources/layer/entry-checks.js';
import type { LayerStoreHandle } from '../sources/source.js';

/** What a stage's use of the layer store left: the stack it planned, and where its files may be linked. */
export interface StageLayers {
  handle: LayerStoreHandle;
  /** The diff_ids of the image's layers, bottom first, once planned (null: no image). */
  diffIds: string[] | null;
  /**
   * How many of the image's bottom layers the base deployment's tree already holds (its
   * origin.layers a strict prefix of the image's): the new tree starts from a copy of the
   * base tree's `kept` (usr/, trusted as every stage trusts it), the rest of the tree is
   * built from those layers' other lines (what the running system changed there is not
   * the image's), then the layers above are applied whole. 0: the tree is built from the
   * store whole (cleared first).
   */
  readonly onto: number;
  /** The base tree's top-level entry copied when onto > 0 (usr). */
  readonly kept: string;
  /** Where an applied op may hardlink its store file (null: nowhere, everything written). */
  linkAt(): ((rel: string) => boolean) | null;
  /** Layers imported and not committed yet (every import is deferred: importLayer's deferCommit). */
  readonly pending: boolean;
  /** Commits them (LayerStore.commitPending): after a syncfs of the sysroot's filesystem that followed the imports. */
  commitPending(): void;
  /** The store's directory (what a sync must cover before commitPending). */
  readonly dir: string;
}

/** Whether the policy hardlinks every file under `kept`. */
export function linksAll(p: CopyPolicy, kept: string): boolean {
  return p.hardlinkPrefixes.some((h) => isUnder(kept, h)) && !(p.copyPrefixes ?? []).some((c) => isUnder(c, kept) || isUnder(kept, c));
}

/** What a stage onto the base's image copies of its tree (see StageLayers.onto). */
const KEPT = 'usr';

/**
 * The sysroot's layer store as a stage's planner sees it (PlanContext.layerStore): an
 * image hands it its layers, each one the store lacks is imported (the others are not
 * read), and the stack's ops come back. Files are then hardlinked to the store's objects
 * under the stage's hardlink prefixes (usr/, as a stage links the booted tree's usr/),
 * copied elsewhere; nowhere when the image carries an SELinux policy, since the stage
 * then labels what it wrote in place, which must never touch a shared object. The layers
 * it imports wait under the store's tmp/ until the stage commits them (commitPending),
 * after the sync that writes back the tree and the imports together.
 */
export function stageLayers(ctx: Context, policy: () => CopyPolicy, base?: { layers?: readonly string[] }, shared: readonly string[] = []): StageLayers {
  const store = new LayerStore(ctx.layout.layersDir, ctx.faults);
  let diffIds: string[] | null = null;
  let labelled = false;
  let onto = 0;
  return {
    get diffIds() {
      return diffIds;
    },
    get onto() {
      return onto;
    },
    kept: KEPT,
    handle: {
      async stack(blobs: readonly StorableLayer[], o: { limits?: Partial<LayerLimits> } = {}) {
        store.prepare();
        const layers = [];
        for (const b of blobs) layers.push((await importLayer(store, b, { xattrPolicy: ctx.xattrPolicy, deferCommit: true, ...(o.limits ? { limits: o.limits } : {}) })).layer);
        diffIds = layers.map((l) => l.record.diffId);
        // Each layer's record says whether it has the policy (no index read at every stage).
        labelled = layers.some((l) => store.hasSelinuxConfig(l));
        // New layers on top of the base deployment's image: start from its tree. Not where
        // the image labels its tree (the stage labels what it wrote; a fresh apply labels every entry).
        onto = labelled ? 0 : sharedPrefix(base?.layers, diffIds);
        // Only where the base's usr/ and the rest of the tree do not depend on each other (keptApart; on a worker: it reads the lower indexes).
        const start = onto === 0 ? null : await runTreeTask(layerStoreTasks.keptApart, { store: path.resolve(store.dir), diffIds: diffIds.slice(0, onto), kept: KEPT, shared: [...shared], pending: store.pendingDirs() }, { faults: ctx.faults });
        if (start !== null && !start.apart) onto = 0;
        // Another change (a layer in the middle, or below): the base tree's usr/ all the same, changed where the new stack's
        // differs (keptDelta: both stacks' usr/ modelled from the indexes on a worker), the rest built from the store.
        // Only where every file under usr/ is linked from its object (a hardlink inside usr/ is then the object's inode too).
        const delta =
          onto === 0 && !labelled && base?.layers !== undefined && base.layers.length > 0 && base.layers[0] === diffIds[0] && linksAll(policy(), KEPT)
            ? await runTreeTask(layerStoreTasks.keptDelta, { store: path.resolve(store.dir), base: [...base.layers], diffIds, kept: KEPT, shared: [...shared], pending: store.pendingDirs() }, { faults: ctx.faults })
            : null;
        if (delta !== null) onto = diffIds.length;
        const from = delta !== null ? { onto, kept: KEPT, lowerOutside: delta.outside, keptLines: delta.lines } : { onto, kept: KEPT, lowerOutside: start?.outside ?? 0 };
        // A file a hardlink joins to a path not linked from the store is copied (crossLinkTargets).
        const linkable = (rel: string): boolean => linkableBy(policy(), rel);
        return { ops: stackOps(store, layers, { ...from, linkable }), count: countStackOps(layers, from) };
      },
      has: (ref) => store.find(ref) !== null,
    },
    get pending() {
      return store.hasPending;
    },
    commitPending: () => store.commitPending(),
    dir: store.dir,
    linkAt() {
      const p = policy();
      if (diffIds === null || labelled || p.hardlinkPrefixes.length === 0) return null;
      return (rel) => linkableBy(p, rel);
    },
  };
}

/** Whether the copy policy links `rel` (under a hardlink prefix, not under a copy prefix). */
function linkableBy(p: CopyPolicy, rel: string): boolean {
  return p.hardlinkPrefixes.some((h) => isUnder(rel, h)) && !(p.copyPrefixes ?? []).some((c) => isUnder(rel, c));
}
