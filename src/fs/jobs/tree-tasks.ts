import { StagedrootError } from '../../errors.js';
import { copyTree, type CopyProgress, type CopyResult, type CopyTreeOptions } from '../trees/copy-tree.js';
import { diffManifests, type PathChange } from '../manifests/diff-manifests.js';
import { changedRows, lookupRows, type Row, type RowSources } from '../merge-rows.js';
import type { FaultHook } from '../core/faults.js';
import { hashFile } from '../core/hash.js';
import { sumFileSizes } from '../manifests/manifest-sizes.js';
import { patchManifest, type PatchResult } from '../manifests/patch-manifest.js';
import type { TouchEvent } from '../trees/root-fs.js';
import { verifyTree, type Drift } from '../manifests/verify-tree.js';
import { removeTreeNow } from '../trees/remove-tree.js';
import { displayPath } from '../core/names.js';
import { snapshotManifest, type SnapshotManifestArgs, type SnapshotManifestResult } from '../manifests/snapshot-manifest.js';
import { syncFilesystemNow } from '../core/sync-fs.js';
import { makeTreeNow, snapshotTreeNow, type StorageKind } from '../trees/storage.js';

/**
 * The tree-sized work of the library, as tasks with plain (cloneable) arguments and
 * results, so that they can run on a worker thread (see tree-jobs.ts): the walk of a
 * copy, the manifest passes, verify, diff, hashing a manifest, removing a tree. Each is
 * synchronous inside (sync calls in a tight loop beat thousands of promises) and
 * reports through the hooks: mutations to the fault hook, progress, skipped entries,
 * and it polls `aborted` between entries.
 */
export interface TaskHooks {
  faults: FaultHook;
  progress(p: CopyProgress | number): void;
  skip(rel: string, why: string): void;
  /** A note for the user (an extended attribute dropped, ...). */
  warn(message: string): void;
  /** Throws ABORTED when the caller's AbortSignal has fired. */
  checkAbort(): void;
}

/** copyTree's options as data a worker can receive: the callbacks come from the task's hooks. */
export type CopyArgs = Omit<CopyTreeOptions, 'faults' | 'onProgress' | 'onSkip' | 'onXattrDrop' | 'checkAbort'>;

export const treeTasks = {
  copyTree: (a: CopyArgs, h: TaskHooks): CopyResult =>
    copyTree({
      ...a,
      faults: h.faults,
      onProgress: (p) => h.progress(p),
      onSkip: (rel, why) => h.skip(rel, why),
      onXattrDrop: (rel, name, why) => h.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`),
      checkAbort: () => h.checkAbort(),
    }),
  snapshotManifest: (a: SnapshotManifestArgs, h: TaskHooks): SnapshotManifestResult => snapshotManifest(a, h),
  patchManifest: (a: { tree: string; before: string | string[]; after: string; events: TouchEvent[]; durable?: boolean }, h: TaskHooks): PatchResult =>
    patchManifest(a.tree, a.before, a.after, a.events, h.faults, a.durable ?? false),
  verifyTree: (a: { tree: string; manifest: string }, h: TaskHooks): Drift[] =>
    verifyTree(a.tree, a.manifest, { onProgress: (done) => h.progress(done), checkAbort: () => h.checkAbort() }),
  diffManifests: (a: { a: string; b: string }): PathChange[] => diffManifests(a.a, a.b),
  hashFile: (a: { file: string }): string => hashFile(a.file),
  /** The /etc merge's rows where the live tree differs from the staged manifest (finalize). */
  changedRows: (a: RowSources & { always: string[] }): Row[] => changedRows(a),
  /** The /etc merge's rows of a few paths (stage's type-conflict check). */
  lookupRows: (a: RowSources & { paths: string[] }): Row[] => lookupRows(a),
  sumFileSizes: (a: { manifest: string; prefixes: string[] }): number => sumFileSizes(a.manifest, a.prefixes),
  removeTree: (a: { path: string }, h: TaskHooks): void => removeTreeNow(a.path, h.faults),
  /** `sync -f` (a fork of the caller would stall its event loop for tens of milliseconds). */
  syncFilesystem: (a: { path: string; env: Record<string, string | undefined> }): void => syncFilesystemNow(a.path, a.env),
  /** A new deployment tree: a btrfs subvolume, or a plain directory. */
  makeTree: (a: { kind: StorageKind; path: string }, h: TaskHooks): void => makeTreeNow(a.kind, a.path, h.faults),
  /** A btrfs snapshot of the booted deployment (a stage's copy step on btrfs). */
  snapshotTree: (a: { src: string; dst: string }, h: TaskHooks): void => snapshotTreeNow(a.src, a.dst, h.faults),
};

export type TreeTasks = typeof treeTasks;
export type TaskName = keyof TreeTasks;
export type TaskArgs<K extends TaskName> = Parameters<TreeTasks[K]>[0];
export type TaskResult<K extends TaskName> = ReturnType<TreeTasks[K]>;

export function abortedError(): StagedrootError {
  return new StagedrootError('ABORTED', 'The operation was cancelled (its AbortSignal fired)');
}
