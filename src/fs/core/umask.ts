import * as fs from 'node:fs';

let read: number | undefined;

/**
 * The process's umask, read once (stagedroot never changes it). From /proc/self/status's
 * `Umask:` line (Linux ≥ 4.7), which reads it without changing it: process.umask() with no
 * argument sets the mask to 0 and back, and a tree worker creating a file in that instant
 * would get it without the mask (Node's DEP0139). Elsewhere, process.umask().
 */
export function processUmask(): number {
  if (read !== undefined) return read;
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(fs.readFileSync('/proc/self/status', 'latin1'));
    if (m) return (read = parseInt(m[1]!, 8));
  } catch {
    // no procfs: the call below
  }
  return (read = process.umask());
}
