import type * as fs from 'node:fs';
import * as path from 'node:path';
import { StagedrootError, isStagedrootError } from '../../errors.js';
import { ioError } from '../core/io-error.js';
import { resolveInRoot, type Resolved } from './resolve-in-root.js';
import { hostIo, readerOf, type TreeReader } from './tree-io.js';

/** What lstat/stat say about an entry (Node's Stats, so callers need not import node:fs). */
export type EntryStats = fs.Stats;

/**
 * A tree seen read-only: the booted tree a source plans against, the staged tree a
 * validator judges. Paths resolve with the same chroot semantics as the writer (RootFs):
 * a tree's own `etc -> /etc` stays inside it, `..` stops at the root. There is no method
 * that writes, creates or removes anything, and nothing inside it can (no writer is held,
 * not even privately): code given a ReadOnlyTree cannot change the tree, and the type
 * checker says so (test/fs/trees/read-only-tree.test.ts has the `@ts-expect-error` proof).
 *
 * A path whose parent is missing or is not a directory simply does not exist here (null,
 * false); a path that cannot be resolved at all (a symlink loop, absurd depth, a path
 * leaving the root) throws, naming the path.
 */
export class ReadOnlyTree {
  /** Host path of the tree's root (for tools run over it, such as `systemd-analyze --root`). */
  readonly root: string;
  /** The reads it makes (of the disk, or of a dry run's overlay): reads only, see readerOf. */
  readonly #io: TreeReader;

  constructor(root: string, io: TreeReader = hostIo) {
    this.root = path.resolve(root);
    this.#io = io === hostIo ? hostIo : readerOf(io);
    Object.freeze(this);
  }

  /** Where `p` leads inside the tree (a final symlink followed with `followLast`); null when a parent is missing. */
  resolve(p: string, opts: { followLast?: boolean } = {}): Resolved | null {
    try {
      return resolveInRoot(this.root, p, { followLast: opts.followLast, io: this.#io });
    } catch (err) {
      if (isStagedrootError(err) && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return null;
      throw err;
    }
  }

  /** lstat of `p` (a final symlink not followed), or null when absent. */
  lstat(p: string): fs.Stats | null {
    return this.resolve(p)?.stat ?? null;
  }

  /** stat of `p` (symlinks followed inside the root), or null when absent or dangling. */
  stat(p: string): fs.Stats | null {
    return this.resolve(p, { followLast: true })?.stat ?? null;
  }

  /** True when `p` exists (`follow`: and a symlink there leads somewhere inside the tree). */
  exists(p: string, opts: { follow?: boolean } = {}): boolean {
    return (opts.follow ? this.stat(p) : this.lstat(p)) !== null;
  }

  /** A regular file's bytes (symlinks followed inside the root), or null when absent. Anything else there is an error. */
  readFile(p: string): Buffer | null {
    const r = this.resolve(p, { followLast: true });
    if (r === null || r.stat === null) return null;
    if (!r.stat.isFile()) {
      throw new StagedrootError('APPLY_FAILED', `${p} is not a regular file`, { path: p, resolvedPath: r.hostPath });
    }
    try {
      return this.#io.readFile(r.hostPath);
    } catch (err) {
      throw ioError(err, p, r.hostPath);
    }
  }

  /** The stored target of the symlink at `p` (not followed), or null when there is no symlink. */
  readlink(p: string): string | null {
    const r = this.resolve(p);
    if (r === null || r.stat === null || !r.stat.isSymbolicLink()) return null;
    try {
      return this.#io.readlink(r.hostPath);
    } catch (err) {
      throw ioError(err, p, r.hostPath);
    }
  }

  /** Sorted names in the directory at `p` (symlinks followed inside the root), or null when there is no directory. */
  readdir(p: string): string[] | null {
    const r = this.resolve(p, { followLast: true });
    if (r === null || r.stat === null || !r.stat.isDirectory()) return null;
    try {
      return this.#io.readdir(r.hostPath);
    } catch (err) {
      throw ioError(err, p, r.hostPath);
    }
  }
}
