import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, readSync } from 'node:fs';

/**
 * `n` random bytes as hex (temp names, lock tokens), read from /dev/urandom: node:crypto
 * loads some twenty internal modules (~5 ms of a CLI start, where `boot` and `mark-good`
 * need nothing else of it); it is the fallback where /dev/urandom cannot be read.
 */
export function randomHex(n: number): string {
  const buf = Buffer.alloc(n);
  try {
    const fd = openSync('/dev/urandom', constants.O_RDONLY);
    try {
      if (readSync(fd, buf, 0, n, null) === n) return buf.toString('hex');
    } finally {
      closeSync(fd);
    }
  } catch {
    // no /dev/urandom (a chroot without /dev): crypto's generator
  }
  return randomBytes(n).toString('hex');
}
