/**
 * The worker thread that runs tree tasks (see tree-jobs.ts). One task at a time; every
 * message back names the job. With a fault hook on the caller's side, each mutation is
 * reported and the worker waits until the hook has run (a crash-test hook SIGKILLs the
 * whole process there, so a worker's calls are crash points like any other).
 */
import { parentPort } from 'node:worker_threads';
import { StagedrootError } from '../../errors.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { abortedError, taskNamed, type TaskHooks } from './tree-tasks.js';
import { toWire } from './wire-error.js';
import { writeCodeCacheAfterTask } from './worker-code-cache.js';

export interface JobRequest {
  id: number;
  /** The URL of the module that defines the task, and its name (see defineTreeTask). */
  module: string;
  task: string;
  args: unknown;
  /** Int32 cells: [0] the abort flag, [1] the fault hook's answer (0 waiting, 1 done, 2 failed). */
  control: SharedArrayBuffer;
  reportFaults: boolean;
}

export type JobMessage =
  | { id: number; type: 'progress'; value: unknown }
  | { id: number; type: 'skip'; rel: string; why: string }
  | { id: number; type: 'warn'; message: string }
  | { id: number; type: 'fault'; op: string; path: string }
  | { id: number; type: 'done'; value: unknown }
  | { id: number; type: 'error'; error: ReturnType<typeof toWire> };

if (parentPort === null) throw new Error('tree-worker.js runs as a worker thread');
const port = parentPort;

port.on('message', (m: JobRequest) => void runJob(m));

async function runJob(m: JobRequest): Promise<void> {
  const post = (msg: JobMessage): void => port.postMessage(msg);
  const ctl = new Int32Array(m.control);
  const faults: FaultHook = m.reportFaults
    ? {
        afterMutation(op, path) {
          Atomics.store(ctl, 1, 0);
          post({ id: m.id, type: 'fault', op, path });
          Atomics.wait(ctl, 1, 0);
          if (Atomics.load(ctl, 1) === 2) throw new StagedrootError('IO', `The fault hook failed after ${op} ${path}`);
        },
      }
    : noFaults;
  const hooks: TaskHooks = {
    faults,
    progress: (value) => post({ id: m.id, type: 'progress', value }),
    skip: (rel, why) => post({ id: m.id, type: 'skip', rel, why }),
    warn: (message) => post({ id: m.id, type: 'warn', message }),
    checkAbort: () => {
      if (Atomics.load(ctl, 0) !== 0) throw abortedError();
    },
  };
  try {
    const task = await taskNamed(m.module, m.task);
    post({ id: m.id, type: 'done', value: task.run(m.args, hooks) });
  } catch (err) {
    post({ id: m.id, type: 'error', error: toWire(err) });
  }
  writeCodeCacheAfterTask(); // after the answer: the caller is not kept waiting for it
}
