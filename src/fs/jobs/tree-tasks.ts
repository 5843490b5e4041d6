import { StagedrootError } from '../../errors.js';
import type { FaultHook } from '../core/faults.js';

/**
 * Tree-sized work as tasks with plain (cloneable) arguments and results, so that they can
 * run on a worker thread (see tree-jobs.ts): the walk of a copy, the manifest passes,
 * verify, diff, hashing, removing a tree, the /etc merge's rows. Each is synchronous
 * inside (sync calls in a tight loop beat thousands of promises) and reports through the
 * hooks: mutations to the fault hook, progress, skipped entries, and it polls `aborted`
 * between entries.
 *
 * A task is defined beside the code it runs (fs/trees/tasks.ts, fs/manifests/tasks.ts,
 * merge/row-tasks.ts), never listed here: this registry knows no task, so that tree work
 * of any layer can run on a worker without the worker layer importing it. A worker finds
 * a task by its name, importing the module that defined it (its `module` URL) when it
 * has not loaded it (the CLI's worker bundle has them all: src/cli/tree-worker-main.ts).
 */
export interface TaskHooks {
  faults: FaultHook;
  progress(p: unknown): void;
  skip(rel: string, why: string): void;
  /** A note for the user (an extended attribute dropped, ...). */
  warn(message: string): void;
  /** Throws ABORTED when the caller's AbortSignal has fired. */
  checkAbort(): void;
}

export interface TreeTask<A, R> {
  /** The URL of the module that defines the task (a worker imports it to find the task). */
  readonly module: string;
  readonly name: string;
  readonly run: (args: A, hooks: TaskHooks) => R;
}

/**
 * Tasks by name (names are unique across modules: a second module defining a name is a
 * programming error). By name, not by module URL: in the CLI's bundles every module has
 * the bundle's URL, and the worker's own bundle has every task registered already.
 */
const registry = new Map<string, TreeTask<unknown, unknown>>();

/** Defines (and registers) a task; `module` is the defining module's `import.meta.url`. */
export function defineTreeTask<A, R>(module: string, name: string, run: (args: A, hooks: TaskHooks) => R): TreeTask<A, R> {
  const task: TreeTask<A, R> = { module, name, run };
  const other = registry.get(name);
  if (other !== undefined && other.module !== module) throw new StagedrootError('IO', `Two tree tasks are named ${name} (${other.module}, ${module})`);
  registry.set(name, task as TreeTask<unknown, unknown>);
  return task;
}

/** The task `name` of `module`, importing the module when this thread has not loaded it yet. */
export async function taskNamed(module: string, name: string): Promise<TreeTask<unknown, unknown>> {
  if (!registry.has(name)) await import(module);
  const task = registry.get(name);
  if (task === undefined) throw new StagedrootError('IO', `No tree task ${name} in ${module}`);
  return task;
}

export function abortedError(): StagedrootError {
  return new StagedrootError('ABORTED', 'The operation was cancelled (its AbortSignal fired)');
}
