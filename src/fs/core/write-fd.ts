import { writeSync } from 'node:fs';

/**
 * Writes all of `bytes` to an open descriptor, synchronously (partial writes continued);
 * returns how many went: fewer when a write fails with an errno (EAGAIN on a full
 * non-blocking pipe, EPIPE), which the caller then handles. Other errors are thrown.
 */
export function writeAllSync(fd: number, bytes: Uint8Array): number {
  let done = 0;
  try {
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
  } catch (err) {
    if (typeof (err as NodeJS.ErrnoException)?.code !== 'string') throw err;
  }
  return done;
}
