import type { FaultHook } from '../fs/core/faults.js';

/**
 * Fault injection for crash tests (stagedroot/testing only, never the product): every
 * mutating filesystem call reports itself to the hook after it has happened, and
 * killAfter makes the process die right after the n-th one (SIGKILL to itself, so no
 * `finally` or cleanup runs).
 */

/** A hook that counts mutations and SIGKILLs the process after the n-th (1-based). */
export function killAfter(n: number, onKill?: (op: string, path: string) => void): FaultHook & { count: number } {
  const hook = {
    count: 0,
    afterMutation(op: string, path: string) {
      hook.count += 1;
      if (hook.count === n) {
        onKill?.(op, path);
        process.kill(process.pid, 'SIGKILL');
      }
    },
  };
  return hook;
}

/** A hook that only counts (to learn how many crash points an operation has). */
export function countingHook(): FaultHook & { count: number; ops: string[] } {
  const hook = {
    count: 0,
    ops: [] as string[],
    afterMutation(op: string, path: string) {
      hook.count += 1;
      hook.ops.push(`${op} ${path}`);
    },
  };
  return hook;
}

/**
 * The fault knob of the test-only CLI entry (crash-cli.ts): STAGEDROOT_FAULT_KILL_AFTER=n
 * kills after the n-th mutation. The production CLI (cli/main.ts) never reads it.
 */
export function faultHookFromEnv(env: NodeJS.ProcessEnv): FaultHook | undefined {
  const kill = env.STAGEDROOT_FAULT_KILL_AFTER;
  if (kill !== undefined && /^\d+$/.test(kill)) return killAfter(Number(kill));
  return undefined;
}
