import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { StagedrootError } from '../../errors.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { abortedError, type TaskHooks, type TreeTask } from './tree-tasks.js';
import type { JobMessage, JobRequest } from './tree-worker.js';
import { takeEarlyTreeWorker } from './early-worker.js';
import { fromWire } from './wire-error.js';

export interface TreeJobOptions {
  /** Mutations of the task are reported here, in order, on the caller's thread. */
  faults?: FaultHook;
  onProgress?: (value: never) => void;
  onSkip?: (rel: string, why: string) => void;
  onWarn?: (message: string) => void;
  /** Cancels the task between two entries (rejects with ABORTED). */
  signal?: AbortSignal;
}

/**
 * Runs a tree task on a worker thread, so that the importing process keeps answering
 * (health probes, watch events) while a 100,000-file tree is copied, verified or
 * removed. Progress, skipped entries and fault-hook calls come back to the caller's
 * thread as they happen; an AbortSignal stops the walk between two entries.
 *
 * Where the compiled worker is not there (the library run from its TypeScript source,
 * as the unit tests do) or STAGEDROOT_TREE_WORKERS=0, the task runs inline, with the
 * same hooks: the same code, only on the caller's thread.
 */
export function runTreeTask<A, R>(task: TreeTask<A, R>, args: A, o: TreeJobOptions = {}): Promise<R> {
  if (o.signal?.aborted) return Promise.reject(abortedError());
  return workerUrl() === null ? runInline(task, args, o) : runInWorker(task, args, o);
}

/** Whether tasks run on worker threads here (false: inline, see runTreeTask). */
export function treeWorkersAvailable(): boolean {
  return workerUrl() !== null;
}

let cachedUrl: URL | null | undefined;
function workerUrl(): URL | null {
  if (process.env.STAGEDROOT_TREE_WORKERS === '0') return null;
  if (cachedUrl === undefined) {
    const url = new URL('./tree-worker.js', import.meta.url);
    cachedUrl = url.protocol === 'file:' && fs.existsSync(fileURLToPath(url)) ? url : null;
  }
  return cachedUrl;
}

async function runInline<A, R>(task: TreeTask<A, R>, args: A, o: TreeJobOptions): Promise<R> {
  await Promise.resolve();
  const hooks: TaskHooks = {
    faults: o.faults ?? noFaults,
    progress: (p) => o.onProgress?.(p as never),
    skip: (rel, why) => o.onSkip?.(rel, why),
    warn: (message) => o.onWarn?.(message),
    checkAbort: () => {
      if (o.signal?.aborted) throw abortedError();
    },
  };
  return task.run(args, hooks);
}

// Idle workers are kept (unref'd: they never hold the process open) so that the tasks
// of one stage do not each pay a worker's start.
const idle: Worker[] = [];
const MAX_IDLE = 4;
let nextId = 1;

/**
 * Starts workers ahead of their first task (loading its modules takes a moment), so that
 * a stage's planning and the workers' start overlap: up to `count` idle ones (a copy
 * split in two parts runs two tasks at once). A no-op when that many are idle already.
 */
export function warmTreeWorker(count = 1): void {
  const url = workerUrl();
  if (url === null) return;
  adoptEarly(url);
  while (idle.length < Math.min(count, MAX_IDLE)) {
    const w = spawnWorker(url);
    w.unref();
    idle.push(w);
  }
}

/** A new worker that leaves the idle list when it dies (its task, if any, sees 'exit' itself). */
function spawnWorker(url: URL): Worker {
  // worker_threads is loaded by the first worker, not by every verb that imports this module.
  const { Worker } = process.getBuiltinModule('node:worker_threads');
  return tracked(new Worker(url));
}

function tracked(w: Worker): Worker {
  w.on('error', () => {}); // reported to the task that runs on it; an idle one is just dropped
  w.on('exit', () => {
    const i = idle.indexOf(w);
    if (i >= 0) idle.splice(i, 1);
  });
  return w;
}

/**
 * The worker the bin started before it loaded the CLI's bundle (early-worker.ts), made the
 * first idle one, so that the stage's tasks run on it rather than on workers started
 * later beside it (before, it was never taken: a third worker's start on two cores).
 */
function adoptEarly(url: URL): void {
  const w = takeEarlyTreeWorker(url);
  if (w !== undefined) idle.push(tracked(w));
}

function takeWorker(url: URL): Worker {
  adoptEarly(url);
  const w = idle.shift() ?? spawnWorker(url); // the oldest: the likeliest to have finished its start
  w.ref();
  return w;
}

function giveBack(w: Worker): void {
  w.unref();
  if (idle.length < MAX_IDLE) idle.push(w);
  else void w.terminate();
}

function runInWorker<A, R>(task: TreeTask<A, R>, args: A, o: TreeJobOptions): Promise<R> {
  const w = takeWorker(workerUrl()!);
  const id = nextId++;
  const control = new SharedArrayBuffer(8);
  const ctl = new Int32Array(control);
  const faults = o.faults ?? noFaults;
  return new Promise<R>((resolve, reject) => {
    const onAbort = (): void => void Atomics.store(ctl, 0, 1);
    const finish = (fn: () => void, reuse: boolean): void => {
      w.off('message', onMessage);
      w.off('error', onError);
      w.off('exit', onExit);
      o.signal?.removeEventListener('abort', onAbort);
      if (reuse) giveBack(w);
      fn();
    };
    const onMessage = (m: JobMessage): void => {
      if (m.id !== id) return;
      switch (m.type) {
        case 'progress':
          o.onProgress?.(m.value as never);
          break;
        case 'skip':
          o.onSkip?.(m.rel, m.why);
          break;
        case 'warn':
          o.onWarn?.(m.message);
          break;
        case 'fault': {
          let answer = 1;
          try {
            faults.afterMutation(m.op, m.path);
          } catch {
            answer = 2;
          }
          Atomics.store(ctl, 1, answer);
          Atomics.notify(ctl, 1);
          break;
        }
        case 'done':
          finish(() => resolve(m.value as R), true);
          break;
        case 'error':
          finish(() => reject(fromWire(m.error)), true);
          break;
      }
    };
    const onError = (err: Error): void => finish(() => reject(new StagedrootError('IO', `The tree worker failed during ${task.name}: ${err.message}`, { cause: err })), false);
    const onExit = (code: number): void => finish(() => reject(new StagedrootError('IO', `The tree worker exited (${code}) during ${task.name}`)), false);
    w.on('message', onMessage);
    w.on('error', onError);
    w.on('exit', onExit);
    o.signal?.addEventListener('abort', onAbort, { once: true });
    const req: JobRequest = { id, module: task.module, task: task.name, args, control, reportFaults: faults !== noFaults };
    w.postMessage(req);
  });
}
