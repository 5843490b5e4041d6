import { defineTreeTask, type TaskHooks, type TreeTask } from '../jobs/tree-tasks.js';
import { hashFile } from '../core/hash.js';
import { diffManifests, manifestDelta, type ManifestDelta, type PathChange } from './diff-manifests.js';
import { sumFileSizes } from './manifest-sizes.js';
import { manifestDigest } from './manifest-overlay.js';
import { patchManifest, type PatchResult, type TouchEvent } from './patch-manifest.js';
import { snapshotManifest, type SnapshotManifestArgs, type SnapshotManifestResult } from './snapshot-manifest.js';
import { verifyTree, type Drift } from './verify-tree.js';

function task<A, R>(name: string, run: (args: A, hooks: TaskHooks) => R): TreeTask<A, R> {
  return defineTreeTask(import.meta.url, name, run);
}

/** The tree tasks of manifests: write, patch, verify against a tree, diff, hash, sum (run with runTreeTask). */
export const manifestTasks = {
  snapshotManifest: task('snapshotManifest', (a: SnapshotManifestArgs, h): SnapshotManifestResult => snapshotManifest(a, h)),
  patchManifest: task('patchManifest', (a: { tree: string; before: string | string[]; after: string; events: TouchEvent[]; durable?: boolean }, h): PatchResult =>
    patchManifest(a.tree, a.before, a.after, a.events, h.faults, a.durable ?? false),
  ),
  verifyTree: task('verifyTree', (a: { tree: string; manifest: string }, h): Drift[] =>
    verifyTree(a.tree, a.manifest, { onProgress: (done) => h.progress(done), checkAbort: () => h.checkAbort() }),
  ),
  diffManifests: task('diffManifests', (a: { a: string; b: string }): PathChange[] => diffManifests(a.a, a.b)),
  manifestDelta: task('manifestDelta', (a: { a: string; b: string }): ManifestDelta => manifestDelta(a.a, a.b)),
  hashFile: task('hashFile', (a: { file: string }): string => hashFile(a.file)),
  /** A deployment's manifest with its overlay, as the state records it (see manifest-overlay.ts). */
  manifestDigest: task('manifestDigest', (a: { file: string }): string => manifestDigest(a.file)),
  sumFileSizes: task('sumFileSizes', (a: { manifest: string; prefixes: string[] }): number => sumFileSizes(a.manifest, a.prefixes)),
};
