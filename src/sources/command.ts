import { StagedrootError } from '../errors.js';
import type { Source } from './source.js';

/** Time a `stage --run` command gets unless told otherwise: an apt upgrade with a new kernel takes minutes. */
export const DEFAULT_RUN_TIMEOUT_MS = 60 * 60 * 1000;

/**
 * `stage --run CMD`: no change set of its own, a command run inside the new tree (a copy
 * of the booted one) instead, as openSUSE's transactional-update runs zypper in a new
 * snapshot. What the command changes is the update; it is validated and committed like
 * any other (see src/stage/run-in-tree.ts for the namespace it runs in).
 */
/** Where the namespace puts the kernel's file systems and the scratch /var: a --bind there would be hidden or reach through their links. */
const NAMESPACE_DIRS = ['proc', 'sys', 'dev', 'var'];

/** The namespace's fresh tmpfs mounts: a --bind below them gets its mount point there, never in the tree. */
export const FRESH_DIRS = ['tmp', 'run'];

/**
 * A `--bind DIR` of `stage --run`: an absolute, normalized path of a directory of the
 * running system, bound read-only at the same path in the new tree for the command
 * (a local package directory, a mounted medium). Checked here for its form; that it is
 * a directory is checked when the command runs.
 */
export function checkRunBind(dir: string): string {
  const bad = (why: string) => new StagedrootError('USAGE', `Expected --bind to be ${why}, got ${JSON.stringify(dir)}`, { option: 'bind', value: dir });
  if (typeof dir !== 'string' || !dir.startsWith('/')) throw bad('an absolute path');
  const parts = dir.split('/').filter((p) => p !== '');
  if (parts.length === 0) throw bad('a directory other than /');
  if (parts.some((p) => p === '.' || p === '..')) throw bad('a path without . or .. components');
  if (NAMESPACE_DIRS.includes(parts[0]!)) throw bad(`outside /${NAMESPACE_DIRS.join(', /')} (the command's namespace makes its own)`);
  return `/${parts.join('/')}`;
}

export function commandSource(command: string, o: { timeoutMs?: number; label?: string; binds?: readonly string[] } = {}): Source {
  if (typeof command !== 'string' || command.trim() === '') {
    throw new StagedrootError('USAGE', `Expected --run to be a command line, got ${JSON.stringify(command)}`, { option: 'run', value: command });
  }
  const timeoutMs = o.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new StagedrootError('USAGE', `Expected --run-timeout to be a positive number of seconds, got ${String(timeoutMs / 1000)}`, { option: 'runTimeout', value: timeoutMs });
  }
  const binds = (o.binds ?? []).map(checkRunBind);
  return {
    kind: 'command',
    describe: `command ${command}`,
    plan: async () => ({ description: `command: ${command}`, label: o.label ?? 'run', ops: [], count: 0, runInTree: { command, timeoutMs, ...(binds.length ? { binds } : {}) } }),
  };
}
