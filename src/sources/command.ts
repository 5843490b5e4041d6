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
export function commandSource(command: string, o: { timeoutMs?: number; label?: string } = {}): Source {
  if (typeof command !== 'string' || command.trim() === '') {
    throw new StagedrootError('USAGE', `Expected --run to be a command line, got ${JSON.stringify(command)}`, { option: 'run', value: command });
  }
  const timeoutMs = o.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new StagedrootError('USAGE', `Expected --run-timeout to be a positive number of seconds, got ${String(timeoutMs / 1000)}`, { option: 'runTimeout', value: timeoutMs });
  }
  return {
    kind: 'command',
    describe: `command ${command}`,
    plan: async () => ({ description: `command: ${command}`, label: o.label ?? 'run', ops: [], count: 0, runInTree: { command, timeoutMs } }),
  };
}
