/**
 * Fault injection for crash tests. Every mutating filesystem call in the safe-fs layer
 * reports itself here after it has happened; a test can make the process die right
 * after the n-th one (SIGKILL to itself, so no `finally` or cleanup runs).
 */
export interface FaultHook {
  /** Called right after each mutating filesystem call, with the call's name and path. */
  afterMutation(op: string, path: string): void;
}

export const noFaults: FaultHook = { afterMutation() {} };

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
 * Reads the fault knobs a CLI process is started with. Only the CLI entry calls this
 * (never at import time): STAGEDROOT_FAULT_KILL_AFTER=n kills after the n-th mutation.
 */
export function faultHookFromEnv(env: NodeJS.ProcessEnv): FaultHook | undefined {
  const kill = env.STAGEDROOT_FAULT_KILL_AFTER;
  if (kill !== undefined && /^\d+$/.test(kill)) return killAfter(Number(kill));
  return undefined;
}
