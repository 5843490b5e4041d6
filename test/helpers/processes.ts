import * as fs from 'node:fs';

/** Alive = exists and is not a zombie (an orphan's reaper may be slow, or absent in a container). */
export function alive(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Whether `pid` is gone, polled: a killed process dies soon but not at once. The bound is a
 * hang guard only, far above any machine's delay; what is checked is that it dies.
 */
export async function gone(pid: number, guardMs = 20_000): Promise<boolean> {
  for (let waited = 0; waited < guardMs && alive(pid); waited += 20) await new Promise((r) => setTimeout(r, 20));
  return !alive(pid);
}

/** SIGKILLs `pid` if a failed test left it running. */
export function killIfAlive(pid: number): void {
  if (!alive(pid)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone meanwhile
  }
}
