import type { Worker } from 'node:worker_threads';

/**
 * A tree worker the bin starts before it loads the CLI's bundle (main.ts, for the verbs
 * that copy a tree: verbs.ts's `treeWork` rows), so that the worker's start (a thread,
 * Node's own bootstrap, the worker bundle's load: tens of milliseconds) runs on another
 * core beside the bundle's load, the sysroot's open and the plan, instead of after them.
 * Handed over through a global (the bin and the bundle are two module instances of this
 * file): tree-jobs.ts takes it as its first worker (takeEarlyTreeWorker). Unref'd from
 * the start: a command line that never runs a task (`stage --help`, a usage error) exits
 * as without it. One that died before it was taken is never handed out.
 */
const KEY = Symbol.for('stagedroot.earlyTreeWorker');

interface Early {
  href: string;
  worker: Worker;
}

const slot = globalThis as unknown as { [KEY]?: Early };

/** Starts the worker of `url` now (nothing where tasks run inline: STAGEDROOT_TREE_WORKERS=0). */
export function startEarlyTreeWorker(url: URL, env: NodeJS.ProcessEnv): void {
  if (env.STAGEDROOT_TREE_WORKERS === '0' || slot[KEY] !== undefined) return;
  const { Worker } = process.getBuiltinModule('node:worker_threads');
  const worker = new Worker(url);
  worker.unref();
  worker.on('error', () => {}); // a worker that fails to start is dropped: the task starts its own
  worker.once('exit', () => {
    if (slot[KEY]?.worker === worker) delete slot[KEY];
  });
  slot[KEY] = { href: url.href, worker };
}

/** The worker the bin started for `url`, once (undefined: none, another worker file, or it died). */
export function takeEarlyTreeWorker(url: URL): Worker | undefined {
  const early = slot[KEY];
  if (early === undefined || early.href !== url.href) return undefined;
  delete slot[KEY];
  return early.worker;
}
