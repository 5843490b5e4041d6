import * as path from 'node:path';
import { noFaults, type FaultHook } from '../fs/core/faults.js';
import { isUnder } from '../fs/core/paths.js';
import type { XattrPolicy } from '../fs/core/xattr.js';
import { runTreeTask, type TreeJobOptions } from '../fs/jobs/tree-jobs.js';
import { defineTreeTask } from '../fs/jobs/tree-tasks.js';
import { RootFs } from '../fs/trees/root-fs.js';
import { decodeXattrs } from './index-lines.js';
import { crossLinkTargets, keptApart, layerLines, storedStack } from './stack-ops.js';
import { LayerStore } from './store.js';
import { keptDelta, type KeptDelta } from './kept-delta.js';

export interface LinkLayersArgs {
  /** The layer store's directory. */
  store: string;
  /** The tree to build (an empty directory, or one to replace whole: it is cleared first). */
  tree: string;
  /** The image's layers, bottom first, by diff_id: each must be in the store. */
  diffIds: string[];
  /**
   * Tree prefixes whose files are hardlinked to the store's objects (immutable content, as
   * a stage's copy policy links usr/ from the booted tree); every other file is copied
   * from its object (etc/, var/: a tree's mutable files never share an inode with the store).
   */
  hardlinkPrefixes: string[];
  /** Prefixes inside those that are copied all the same. */
  copyPrefixes?: string[];
  /** 'deferred' (default): the caller makes the tree durable with one syncfs; 'each': every entry fsynced. */
  durability?: 'each' | 'deferred';
  xattrPolicy?: XattrPolicy;
}

export interface LinkProgress {
  layer: number;
  layers: number;
  entries: number;
}

export interface LinkResult {
  entries: number;
  /** Files hardlinked to an object, and files copied from one (outside the prefixes, or a link refused). */
  linked: number;
  copied: number;
  /** Tree paths whose SELinux label the layers gave explicitly (RootFs.explicitLabels). */
  explicitLabels: string[];
}

/**
 * Builds a tree from a stack of stored layers, bottom first, through the safe-fs layer
 * (RootFs): the same operations, in the same order, as the fresh apply of an image
 * (sources/oci/image-source.ts: the tree cleared, then per layer what layer/plan.ts
 * yields), except that a file's content is not written but linked from the store's
 * object (RootFs.linkFrom). Per layer: its opaque directories cleared, its whiteouts
 * removed (they apply to the layers below), then its entries in archive order with OCI
 * `replace` (a directory over a directory keeps it, anything else is replaced), then each
 * directory's final mode and mtime, deepest first. The tree's own symlinks are followed
 * inside the tree as the fresh apply follows them. The index is read line by line: memory
 * does not grow with the layer. Synchronous (run it as the tree task, linkLayers).
 */
export function linkLayersNow(a: LinkLayersArgs, faults: FaultHook = noFaults, onProgress?: (p: LinkProgress) => void, checkAbort?: () => void): LinkResult {
  const store = new LayerStore(a.store, faults);
  const layers = storedStack(store, a.diffIds);
  const root = new RootFs(a.tree, { faults, durability: a.durability ?? 'deferred', xattrPolicy: a.xattrPolicy });
  const linkAt = (rel: string): boolean => a.hardlinkPrefixes.some((p) => isUnder(rel, p)) && !(a.copyPrefixes ?? []).some((p) => isUnder(rel, p));
  const res: LinkResult = { entries: 0, linked: 0, copied: 0, explicitLabels: [] };
  root.clearDirectory('');
  const never = (): boolean => false;
  layers.forEach((layer, i) => {
    // A file a hardlink joins to a path not linked (etc/x -> usr/y) is copied: etc/x must not share the store object.
    const links = new Map<string, string>();
    let noLink: ReadonlySet<string> | undefined;
    for (const l of layerLines(layer, undefined, links)) {
      noLink ??= crossLinkTargets(links, linkAt); // links is filled before the first line
      switch (l.t) {
        case 'd':
          // u+rwx while children are made; the real mode comes with the `a` line.
          root.mkdir(l.p, { mode: (l.m ?? 0o755) | 0o700, uid: l.u, gid: l.g, replace: true, xattrs: decodeXattrs(l.x) });
          break;
        case 'f':
          if (root.linkFrom(l.p, store.objectPath(l.k), { replace: true, linkAt: noLink.has(l.p) ? never : linkAt, explicitLabel: l.l === 1 })) res.linked += 1;
          else res.copied += 1;
          break;
        case 'l':
          root.symlink(l.p, l.to, { uid: l.u, gid: l.g, replace: true, xattrs: decodeXattrs(l.x) });
          break;
        case 'h':
          root.link(l.p, l.to, { replace: true });
          break;
        case 'a':
          root.setAttrs(l.p, { mode: l.m, mtime: l.mt });
          break;
        // The lower layers' entries this layer hides (layerLines gives them first).
        case 'o':
          root.clearDirectory(l.p);
          continue;
        case 'w':
          root.remove(l.p, { recursive: true, missingOk: true });
          continue;
      }
      res.entries += 1;
      if (res.entries % 1000 === 0) {
        checkAbort?.();
        onProgress?.({ layer: i + 1, layers: layers.length, entries: res.entries });
      }
    }
  });
  res.explicitLabels = [...root.explicitLabels];
  onProgress?.({ layer: layers.length, layers: layers.length, entries: res.entries });
  return res;
}

export interface KeptApartArgs {
  store: string;
  /** The stack's layers, bottom first, by diff_id. */
  diffIds: string[];
  kept: string;
  shared: string[];
  /** Layers the caller's store holds pending (LayerStore.pendingDirs): diff_id and directory. */
  pending?: [string, string][];
}

export interface KeptDeltaArgs extends KeptApartArgs {
  /** The base deployment's stack, bottom first. */
  base: string[];
}

/** The tree tasks of the layer store (run with runTreeTask: on a worker thread where there is one). */
export const layerStoreTasks = {
  keptDelta: defineTreeTask(import.meta.url, 'layerStore.keptDelta', (a: KeptDeltaArgs): KeptDelta | null => {
    const store = new LayerStore(a.store).adoptPending(a.pending ?? []);
    const all = [...a.base, ...a.diffIds].map((d) => store.byDiffId(d));
    if (all.some((l) => l === null)) return null; // a base layer released: the tree is built whole
    return keptDelta(storedStack(store, a.base), storedStack(store, a.diffIds), a.kept, a.shared);
  }),
  keptApart: defineTreeTask(import.meta.url, 'layerStore.keptApart', (a: KeptApartArgs) => keptApart(storedStack(new LayerStore(a.store).adoptPending(a.pending ?? []), a.diffIds), a.kept, a.shared)),
  linkLayers: defineTreeTask(import.meta.url, 'layerStore.linkLayers', (a: LinkLayersArgs, h): LinkResult =>
    linkLayersNow(a, h.faults, (p) => h.progress(p), () => h.checkAbort()),
  ),
};

/** linkLayersNow on a tree worker (the caller's event loop keeps running while a large tree is linked). */
export function linkLayers(a: LinkLayersArgs, o: TreeJobOptions = {}): Promise<LinkResult> {
  return runTreeTask(layerStoreTasks.linkLayers, { ...a, store: path.resolve(a.store), tree: path.resolve(a.tree) }, o);
}
