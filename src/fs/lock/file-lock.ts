import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError } from '../core/io-error.js';
import { acquireLock } from './writer-lock.js';

/**
 * Runs `fn` holding the lock of one file that several processes may write at once (a
 * blob of a shared blob directory, its `index.json`): a directory `FILE.lock` beside it,
 * taken and broken as the sysroot's writer lock is (writer-lock.ts: a prepared directory
 * renamed into place, a dead holder's lock broken under `FILE.lock.break`). Waits up to
 * `waitSeconds` for a live holder, then BUSY naming `what`.
 */
export async function withFileLock<T>(file: string, what: string, waitSeconds: number, fn: () => Promise<T>): Promise<T> {
  const dir = path.dirname(file);
  try {
    await fs.promises.mkdir(dir, { recursive: true });
  } catch (err) {
    throw ioError(err, dir, dir, 'sysroot');
  }
  const lock = await acquireLock(dir, { name: `${path.basename(file)}.lock`, what, waitSeconds, operation: `write ${path.basename(file)}` });
  try {
    return await fn();
  } finally {
    lock.release();
  }
}
