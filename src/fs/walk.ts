import * as fs from 'node:fs';
import { childPath, nameFromBytes } from './names.js';
import { comparePaths, isUnder } from './paths.js';

export interface WalkVisitor {
  /**
   * Called for every entry below the root in depth-first order with sorted children.
   * `host` is a string, or a Buffer when the path holds a name that is not UTF-8
   * (`rel` then carries those bytes escaped, see names.ts).
   */
  enter(rel: string, host: string | Buffer, st: fs.Stats): void;
  /** Called after a directory's children. */
  leave?(rel: string, host: string | Buffer, st: fs.Stats): void;
}

/**
 * The names in a directory as tree path strings, sorted. Node decodes names as UTF-8 and
 * turns invalid bytes into U+FFFD, losing them: a directory with such a name is read
 * again as bytes (rare, so the usual directory costs one `includes` per name).
 */
export function readNames(host: string | Buffer): string[] {
  const names = fs.readdirSync(host);
  if (names.some((n) => n.includes('\ufffd'))) {
    return fs.readdirSync(host, { encoding: 'buffer' }).map(nameFromBytes).sort();
  }
  return names.sort();
}

/**
 * Walks a tree synchronously (sync calls in a tight loop beat thousands of promises),
 * never following symlinks, visiting children in sorted order so that the visit order
 * equals the manifest order.
 */
export function walkTree(root: string, visitor: WalkVisitor, range?: WalkRange): void {
  let stopped = false;
  const recurse = (relDir: string, hostDir: string | Buffer): void => {
    const names = readNames(hostDir);
    for (const name of names) {
      const rel = relDir === '' ? name : relDir + '/' + name;
      if (range !== undefined) {
        // Everything from here on sorts after `hi`: the walk is over.
        if (range.hi !== null && comparePaths(rel, range.hi) >= 0) {
          stopped = true;
          return;
        }
        if (range.lo !== null && comparePaths(rel, range.lo) < 0) {
          // Before the range: skipped whole, unless `lo` is below it (then its later children are in).
          if (isUnder(range.lo, rel)) {
            recurse(rel, childPath(hostDir, name));
            if (stopped) return;
          }
          continue;
        }
      }
      const host = childPath(hostDir, name);
      const st = fs.lstatSync(host);
      visitor.enter(rel, host, st);
      if (st.isDirectory()) {
        recurse(rel, host);
        // A directory the range ends in is an ancestor of `hi`: whoever split the walk finishes it.
        if (stopped) return;
        visitor.leave?.(rel, host, st);
      }
    }
  };
  recurse('', root);
}

/**
 * A part of a walk in manifest order: the entries from `lo` (included) to `hi`
 * (excluded); null is the start or the end. The directories above `lo` are passed
 * through without a visit; the ones above `hi` are entered but never left.
 */
export interface WalkRange {
  lo: string | null;
  hi: string | null;
}
