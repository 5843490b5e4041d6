import { defineTreeTask, type TaskHooks, type TreeTask } from '../jobs/tree-tasks.js';
import { syncFilesystemNow } from '../core/sync-fs.js';
import { displayPath } from '../core/names.js';
import { copyTree, type CopyResult, type CopyTreeOptions } from './copy-tree.js';
import { removeTreeNow } from './remove-tree.js';
import { makeTreeNow, snapshotTreeNow, type StorageKind } from './storage.js';

/** copyTree's options as data a worker can receive: the callbacks come from the task's hooks. */
export type CopyArgs = Omit<CopyTreeOptions, 'faults' | 'onProgress' | 'onSkip' | 'onXattrDrop' | 'checkAbort'>;

function task<A, R>(name: string, run: (args: A, hooks: TaskHooks) => R): TreeTask<A, R> {
  return defineTreeTask(import.meta.url, name, run);
}

/** The tree tasks of whole trees: copy, remove, create, snapshot, sync (run with runTreeTask). */
export const treeTasks = {
  copyTree: task('copyTree', (a: CopyArgs, h): CopyResult =>
    copyTree({
      ...a,
      faults: h.faults,
      onProgress: (p) => h.progress(p),
      onSkip: (rel, why) => h.skip(rel, why),
      onXattrDrop: (rel, name, why) => h.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`),
      checkAbort: () => h.checkAbort(),
    }),
  ),
  removeTree: task('removeTree', (a: { path: string }, h): void => removeTreeNow(a.path, h.faults)),
  /** `sync -f` (a fork of the caller would stall its event loop for tens of milliseconds). */
  syncFilesystem: task('syncFilesystem', (a: { path: string; env: Record<string, string | undefined> }): void => syncFilesystemNow(a.path, a.env)),
  /** A new deployment tree: a btrfs subvolume, or a plain directory. */
  makeTree: task('makeTree', (a: { kind: StorageKind; path: string }, h): void => makeTreeNow(a.kind, a.path, h.faults)),
  /** A btrfs snapshot of the booted deployment (a stage's copy step on btrfs). */
  snapshotTree: task('snapshotTree', (a: { src: string; dst: string }, h): void => snapshotTreeNow(a.src, a.dst, h.faults)),
};
