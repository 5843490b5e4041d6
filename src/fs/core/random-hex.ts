import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, readSync } from 'node:fs';

/**
 * `n` random bytes as hex (temp names, lock tokens), read from /dev/urandom: node:crypto
 * loads some twenty internal modules (~5 ms of a CLI start, where `boot` and `mark-good`
 * need nothing else of it); it is the fallback where /dev/urandom cannot be read. The
 * bytes are read 4 KiB at a time and handed out in turn (each byte once): a tree write
 * takes a temp name per entry, and an open, read and close of /dev/urandom each time
 * was a tenth of a layer import.
 */
const POOL = 4096;
let pool: Buffer | null = null;
let used = POOL;

export function randomHex(n: number): string {
  if (n > POOL) return randomBytes(n).toString('hex');
  if (pool === null || used + n > POOL) {
    if (!refill()) return randomBytes(n).toString('hex');
  }
  const hex = pool!.toString('hex', used, used + n);
  used += n;
  return hex;
}

function refill(): boolean {
  const buf = Buffer.alloc(POOL);
  try {
    const fd = openSync('/dev/urandom', constants.O_RDONLY);
    try {
      if (readSync(fd, buf, 0, POOL, null) !== POOL) return false;
    } finally {
      closeSync(fd);
    }
  } catch {
    // no /dev/urandom (a chroot without /dev): crypto's generator
    return false;
  }
  pool = buf;
  used = 0;
  return true;
}
