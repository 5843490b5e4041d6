/**
 * The V8 code cache of a tree worker's bundle (dist/cli/tree-worker.cjs and
 * dist/lib/tree-worker.cjs, run by the worker's entry through src/cli/code-cache.ts), written
 * from the worker itself: a worker thread is ended by terminate() or by its process's exit,
 * neither of which runs its 'exit' handlers, so the cache of a bundle that ran without one
 * (absent, another build's, rejected by V8 after a Node upgrade) is written after each
 * task instead, each time a superset of the functions compiled so far, until a write fails
 * (a read-only /usr, another user's package: never tried again in this worker). A worker
 * that ran from an accepted cache writes nothing. The entry and the bundle are two module
 * instances of this file: the writer goes from one to the other through a global.
 */
const KEY = Symbol.for('stagedroot.treeWorkerCodeCache');

const slot = globalThis as unknown as { [KEY]?: () => boolean };

/** The entry's: `write` replaces the cache file with what V8 has compiled so far (false: it could not). */
export function offerCodeCacheWrite(write: () => boolean): void {
  slot[KEY] = write;
}

/** The worker's, after each task: writes the cache while the bundle runs without an accepted one. */
export function writeCodeCacheAfterTask(): void {
  const write = slot[KEY];
  if (write !== undefined && !write()) delete slot[KEY];
}
