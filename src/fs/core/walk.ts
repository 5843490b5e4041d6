import * as fs from 'node:fs';
import { childPath, nameFromBytes } from './names.js';
import { comparePaths, isUnder } from './paths.js';

/**
 * THE tree walker of stagedroot (every module that walks a tree uses `walk` or one of its
 * two callback forms below): depth first, children in sorted order (the visit order
 * equals the manifest order), never following symlinks, names kept as bytes (a name
 * that is not UTF-8 is read again as bytes and carried escaped, see names.ts), and an
 * lstat only where the caller asks for one (readdir's d_type says what an entry is).
 */

/** An entry as readdir reports it: its tree name and its type, with no lstat. */
export interface DirEntry {
  name: string;
  dirent: fs.Dirent | fs.Dirent<Buffer>;
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

/**
 * A part of a walk in manifest order: the entries from `lo` (included) to `hi`
 * (excluded); null is the start or the end. The directories above `lo` are passed
 * through without a visit; the ones above `hi` are entered but never left.
 */
export interface WalkRange {
  lo: string | null;
  hi: string | null;
}

/** One step of a walk: an entry, or (`leave`) the end of an entered directory's children. */
export class WalkStep {
  #skipped = false;
  constructor(
    /** The tree path below the root ("etc/motd"), non-UTF-8 bytes escaped. */
    readonly rel: string,
    /** A string, or a Buffer when the path holds a name that is not UTF-8. */
    readonly host: string | Buffer,
    /** The type readdir gave. */
    readonly entry: DirEntry,
    /** True for the step after a directory's children (the same rel, host and entry). */
    readonly leave = false,
  ) {}
  /** A directory's children are not walked (and it has no leave step). Call before the next step. */
  skip(): void {
    this.#skipped = true;
  }
  get skipped(): boolean {
    return this.#skipped;
  }
}

export interface WalkOptions {
  range?: WalkRange;
  /** What a directory that cannot be read throws (default: Node's error as it is). */
  onReadError?: (err: unknown, rel: string, host: string | Buffer) => unknown;
}

interface Frame {
  host: string | Buffer;
  rel: string;
  list: DirEntry[];
  i: number;
  /** The step that entered it (null for the root and the directories a range passes through). */
  step: WalkStep | null;
}

/**
 * Walks a tree lazily (a pull: a consumer may await between steps, as a directory source
 * does): every entry below `root`, then, for each directory entered, a `leave` step after
 * its children. A directory is entered unless its step was skipped. One explicit stack
 * (no nested generators): a step costs the same at any depth.
 */
export function* walk(root: string | Buffer, o: WalkOptions = {}): Generator<WalkStep, void, undefined> {
  const range = o.range;
  const read = (rel: string, host: string | Buffer): DirEntry[] => {
    try {
      return readEntries(host);
    } catch (err) {
      throw o.onReadError === undefined ? err : o.onReadError(err, rel, host);
    }
  };
  const stack: Frame[] = [{ host: root, rel: '', list: read('', root), i: 0, step: null }];
  let last: WalkStep | null = null; // the entry step yielded last: entered when it is an unskipped directory
  for (;;) {
    if (last !== null) {
      if (last.entry.dirent.isDirectory() && !last.skipped) stack.push({ host: last.host, rel: last.rel, list: read(last.rel, last.host), i: 0, step: last });
      last = null;
    }
    const top = stack[stack.length - 1];
    if (top === undefined) return;
    if (top.i >= top.list.length) {
      stack.pop();
      if (top.step !== null) yield new WalkStep(top.step.rel, top.step.host, top.step.entry, true);
      continue;
    }
    const e = top.list[top.i++]!;
    const rel = top.rel === '' ? e.name : top.rel + '/' + e.name;
    if (range !== undefined) {
      if (range.hi !== null && comparePaths(rel, range.hi) >= 0) return;
      if (range.lo !== null && comparePaths(rel, range.lo) < 0) {
        if (isUnder(range.lo, rel)) {
          const host = childPath(top.host, e.name);
          stack.push({ host, rel, list: read(rel, host), i: 0, step: null });
        }
        continue;
      }
    }
    last = new WalkStep(rel, childPath(top.host, e.name), e);
    yield last;
  }
}

export interface EntryVisitor {
  /**
   * Called for every entry below the root in walk order, with the type readdir gave
   * (the visitor lstat's when it needs more); returns true to walk into the entry (a
   * directory), whose `leave` then follows its children.
   */
  enter(rel: string, host: string | Buffer, e: DirEntry): boolean;
  leave?(rel: string, host: string | Buffer): void;
}

/**
 * `walk` with a visitor: no lstat per entry, the visitor gets readdir's type and decides
 * what to read (a hardlink farm links a file in one call). Same order, same ranges.
 */
export function walkEntries(root: string | Buffer, visitor: EntryVisitor, range?: WalkRange): void {
  for (const s of walk(root, { range })) {
    if (s.leave) visitor.leave?.(s.rel, s.host);
    else if (!visitor.enter(s.rel, s.host, s.entry)) s.skip();
  }
}

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

/** `walk` with an lstat of every entry, given to the visitor. */
export function walkTree(root: string | Buffer, visitor: WalkVisitor, range?: WalkRange): void {
  const dirs: fs.Stats[] = []; // the directories entered and not yet left
  for (const s of walk(root, { range })) {
    if (s.leave) {
      visitor.leave?.(s.rel, s.host, dirs.pop()!);
      continue;
    }
    const st = fs.lstatSync(s.host);
    visitor.enter(s.rel, s.host, st);
    // Entered when both readdir and lstat say directory (one changed under the walk: not entered).
    if (st.isDirectory() && s.entry.dirent.isDirectory()) dirs.push(st);
    else s.skip();
  }
}
