import * as fs from 'node:fs';
import * as crypto from 'node:crypto';

const CHUNK = 1 << 20;
let shared: Buffer | null = null;

/** sha256 of a file, read in 1 MiB chunks (bounded memory, sync: fast in tight loops). */
export function hashFile(hostPath: string | Buffer): string {
  const buf = (shared ??= Buffer.allocUnsafe(CHUNK));
  const h = crypto.createHash('sha256');
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

/**
 * sha256 (hex) of bytes in memory, in one call where Node has crypto.hash (≥ 20.12, 21.7),
 * which skips the Hash object a small input would pay more for than its hashing; else
 * through createHash. Read from the namespace, not imported by name: a named import Node
 * lacks would fail the whole module's load on an older Node 20 (package.json says ≥ 20).
 */
const oneShot = (crypto as { hash?: (alg: string, data: string | Uint8Array, enc: 'hex') => string }).hash;
export const sha256Hex: (data: string | Uint8Array) => string =
  oneShot === undefined ? (data) => crypto.createHash('sha256').update(data).digest('hex') : (data) => oneShot('sha256', data, 'hex');
