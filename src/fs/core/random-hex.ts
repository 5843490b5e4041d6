import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';

/**
 * `n` random bytes as hex (temp names, lock tokens), read from /dev/urandom: node:crypto
 * loads some twenty internal modules (~5 ms of a CLI start, where `boot` and `mark-good`
 * need nothing else of it); it is the fallback where /dev/urandom cannot be read.
 */
export function randomHex(n: number): string {
  const buf = Buffer.alloc(n);
  try {
    const fd = fs.openSync('/dev/urandom', fs.constants.O_RDONLY);
    try {
      if (fs.readSync(fd, buf, 0, n, null) === n) return buf.toString('hex');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // no /dev/urandom (a chroot without /dev): crypto's generator
  }
  return randomBytes(n).toString('hex');
}
