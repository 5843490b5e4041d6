import * as fs from 'node:fs';
import { createHash } from 'node:crypto';

const CHUNK = 1 << 20;
let shared: Buffer | null = null;

/** sha256 of a file, read in 1 MiB chunks (bounded memory, sync: fast in tight loops). */
export function hashFile(hostPath: string | Buffer): string {
  const buf = (shared ??= Buffer.allocUnsafe(CHUNK));
  const h = createHash('sha256');
  const fd = fs.openSync(hostPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    for (;;) {
      const n = fs.readSync(fd, buf, 0, CHUNK, null);
      if (n === 0) break;
      h.update(buf.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}

