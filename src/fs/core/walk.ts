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
  const dirs: fs.Stats[] = []; // the directories entered and not yet left
  walkEntries(
    root,
    {
      enter(rel, host) {
        const st = fs.lstatSync(host);
        visitor.enter(rel, host, st);
        if (!st.isDirectory()) return false;
        dirs.push(st);
        return true;
      },
      leave(rel, host) {
        visitor.leave?.(rel, host, dirs.pop()!);
      },
    },
    range,
  );
}

/** An entry as readdir reports it: its tree name and its type, with no lstat. */
export interface DirEntry {
  name: string;
  dirent: fs.Dirent | fs.Dirent<Buffer>;
}

/**
 * A directory's entries with their types (readdir's d_type: no lstat), sorted by name
 * as readNames sorts them; a name that is not UTF-8 is read again as bytes.
 */
export function readEntries(host: string | Buffer): DirEntry[] {
  const list = fs.readdirSync(host, { withFileTypes: true });
  const out: DirEntry[] = list.some((d) => d.name.includes('\ufffd'))
    ? fs.readdirSync(host, { withFileTypes: true, encoding: 'buffer' }).map((d) => ({ name: nameFromBytes(d.name), dirent: d }))
    : list.map((d) => ({ name: d.name, dirent: d }));
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export interface EntryVisitor {
  /**
   * Called for every entry below the root in the order of walkTree, with the type
   * readdir gave (the visitor lstat's when it needs more); returns true to walk into
   * the entry (a directory), whose `leave` then follows its children.
   */
  enter(rel: string, host: string | Buffer, e: DirEntry): boolean;
  leave?(rel: string, host: string | Buffer): void;
}

/**
 * walkTree without an lstat per entry: the visitor gets readdir's type and decides
 * what to read (a hardlink farm links a file in one call). Same order, same ranges.
 */
export function walkEntries(root: string, visitor: EntryVisitor, range?: WalkRange): void {
  let stopped = false;
  const recurse = (relDir: string, hostDir: string | Buffer): void => {
    for (const e of readEntries(hostDir)) {
      const rel = relDir === '' ? e.name : relDir + '/' + e.name;
      if (range !== undefined) {
        if (range.hi !== null && comparePaths(rel, range.hi) >= 0) {
          stopped = true;
          return;
        }
        if (range.lo !== null && comparePaths(rel, range.lo) < 0) {
          if (isUnder(range.lo, rel)) {
            recurse(rel, childPath(hostDir, e.name));
            if (stopped) return;
          }
          continue;
        }
      }
      const host = childPath(hostDir, e.name);
      if (visitor.enter(rel, host, e)) {
        recurse(rel, host);
        if (stopped) return;
        visitor.leave?.(rel, host);
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
