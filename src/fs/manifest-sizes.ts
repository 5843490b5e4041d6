import * as fs from 'node:fs';
import { StagedrootError } from '../errors.js';
import { isUnder } from './paths.js';
import { cheapPath } from './manifest.js';

/**
 * Sums the sizes of a manifest's regular files outside `prefixes`, in one streaming
 * pass with a bare JSON.parse per line (no schema check: this feeds an estimate, and
 * the manifest's integrity is checked by its sha256 where it matters). About 2.5x
 * faster than ManifestReader, which matters because it runs before every stage.
 */
export function sumFileSizes(manifest: string, prefixes: readonly string[]): number {
  let fd: number;
  try {
    fd = fs.openSync(manifest, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (err) {
    throw new StagedrootError('STATE_CORRUPT', `Cannot open manifest ${manifest}: ${(err as Error).message}`, { path: manifest, cause: err });
  }
  const buf = Buffer.allocUnsafe(1 << 20);
  let rest = '';
  let sum = 0;
  const add = (line: string): void => {
    if (line === '') return;
    // Most lines are under a prefix (usr/): skipped on their path alone, unparsed.
    const cheap = cheapPath(line);
    if (cheap !== null && prefixes.some((p) => isUnder(cheap, p))) return;
    let e: { p?: unknown; t?: unknown; s?: unknown };
    try {
      e = JSON.parse(line) as typeof e;
    } catch (err) {
      throw new StagedrootError('STATE_CORRUPT', `Manifest ${manifest} has a line that is not JSON`, { path: manifest, cause: err });
    }
    if (e.t === 'f' && typeof e.s === 'number' && typeof e.p === 'string' && !prefixes.some((p) => isUnder(e.p as string, p))) sum += e.s;
  };
  try {
    for (let n = fs.readSync(fd, buf, 0, buf.length, null); n > 0; n = fs.readSync(fd, buf, 0, buf.length, null)) {
      const parts = (rest + buf.toString('utf8', 0, n)).split('\n');
      rest = parts.pop()!;
      for (const line of parts) add(line);
    }
    add(rest);
  } finally {
    fs.closeSync(fd);
  }
  return sum;
}
