import * as fs from 'node:fs';
import type { FaultHook } from '../core/faults.js';
import { ioError } from '../core/io-error.js';
import { deleteSubvolumesIn } from './storage.js';

/** Removes a tree (not following symlinks; btrfs subvolumes deleted whole); missing is fine. One mutation, reported after it. */
export function removeTreeNow(p: string, faults: FaultHook): void {
  try {
    fs.lstatSync(p);
  } catch {
    return;
  }
  try {
    deleteSubvolumesIn(p); // a btrfs deployment: its tree goes in one call
    fs.rmSync(p, { recursive: true, force: true });
  } catch (err) {
    throw ioError(err, p, p, 'sysroot');
  }
  faults.afterMutation('rm', p);
}
