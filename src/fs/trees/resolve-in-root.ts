import type * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { ioError } from '../core/io-error.js';
import { splitSourcePath, MAX_PATH_DEPTH } from '../core/paths.js';
import { hostIo, type TreeReader } from './tree-io.js';

export interface Resolved {
  /** Host path of the entry (its parent is a real directory inside the root). */
  hostPath: string;
  /** Real tree-relative path ("" is the root). */
  rel: string;
  /** lstat of the entry, or null when it does not exist. */
  stat: fs.Stats | null;
}

export interface ResolveOptions {
  /** Follow a symlink in the last component too (inside the root). */
  followLast?: boolean;
  /**
   * Called for a missing intermediate directory (host path, real tree-relative path);
   * it must create it. Without it, a missing parent is an ENOENT error. Only the writer
   * (RootFs) passes one: a read-only tree cannot create anything.
   */
  createParent?: (host: string, rel: string) => void;
  /** The system calls (default: the disk; a dry run passes an overlay). */
  io?: TreeReader;
  /**
   * Real tree-relative paths known to be real directories (a writer's cache, kept valid
   * by the writer, see RootFs's cacheDirs): such an intermediate component is not lstat'ed
   * again; every intermediate directory found or created is added.
   */
  knownDirs?: Set<string>;
}

const MAX_SYMLINK_HOPS = 40;

/**
 * Resolves a tree path with chroot semantics: symlinks in the tree are followed relative
 * to the tree's own root (an absolute `etc -> /etc` means the tree's `etc`), `..` stops
 * at the root, the last component is followed only with `followLast`. Defence in depth:
 * whatever resolution did, the result must be inside the root. Shared by the writer
 * (RootFs) and the read-only view (ReadOnlyTree), so both see the same tree.
 */
export function resolveInRoot(root: string, p: string, opts: ResolveOptions = {}): Resolved {
  const original = p;
  const io = opts.io ?? hostIo;
  // A backslash is an ordinary byte of a Linux name here; sources decide what they accept.
  const queue = splitSourcePath(p, 'path', { allowBackslash: true });
  if (queue.length > MAX_PATH_DEPTH) {
    throw new StagedrootError('UNSAFE_ENTRY', `The path ${original} is ${queue.length} components deep (limit ${MAX_PATH_DEPTH})`, { path: original });
  }
  const hostOf = (parts: string[]): string => (parts.length === 0 ? root : root + '/' + parts.join('/'));
  const stack: string[] = [];
  let hops = 0;
  while (queue.length > 0) {
    const c = queue.shift()!;
    if (c === '..') {
      stack.pop(); // chroot: ".." at the root stays at the root
      continue;
    }
    const isLast = queue.length === 0;
    const known = opts.knownDirs;
    if (known !== undefined && !isLast && known.has(stack.length === 0 ? c : `${stack.join('/')}/${c}`)) {
      stack.push(c);
      continue;
    }
    const host = hostOf([...stack, c]);
    let st: fs.Stats | null;
    try {
      st = io.lstat(host);
    } catch (err) {
      throw ioError(err, original, host);
    }
    if (st === null) {
      if (isLast) return checked(root, { hostPath: host, rel: [...stack, c].join('/'), stat: null });
      if (opts.createParent === undefined) {
        throw new StagedrootError('APPLY_FAILED', `Cannot resolve ${original}: ${[...stack, c].join('/')} does not exist`, { path: original, resolvedPath: host, errno: 'ENOENT' });
      }
      opts.createParent(host, [...stack, c].join('/'));
      stack.push(c);
      known?.add(stack.join('/'));
      continue;
    }
    if (st.isSymbolicLink() && (!isLast || opts.followLast)) {
      if (++hops > MAX_SYMLINK_HOPS) {
        throw new StagedrootError('APPLY_FAILED', `Too many levels of symbolic links resolving ${original}`, { path: original, errno: 'ELOOP' });
      }
      const target = io.readlink(host);
      if (target.startsWith('/')) stack.length = 0;
      queue.unshift(...target.split('/').filter((x) => x !== '' && x !== '.'));
      continue;
    }
    if (isLast) return checked(root, { hostPath: host, rel: [...stack, c].join('/'), stat: st });
    if (!st.isDirectory()) {
      const at = [...stack, c].join('/');
      throw new StagedrootError('APPLY_FAILED', `Cannot create ${original}: its parent path ${at} is not a directory (ENOTDIR)`, { path: original, resolvedPath: host, errno: 'ENOTDIR' });
    }
    stack.push(c);
    known?.add(stack.join('/'));
  }
  // Only reachable when every component was ".." or a symlink to the root.
  return checked(root, { hostPath: root, rel: '', stat: io.lstat(root) });
}

function checked(root: string, r: Resolved): Resolved {
  if (r.hostPath !== root && !r.hostPath.startsWith(root + '/')) {
    throw new StagedrootError('PATH_ESCAPE', `Path ${r.rel} resolves outside the root`, { path: r.rel, resolvedPath: r.hostPath });
  }
  return r;
}

/**
 * The real tree-relative path `p` names, reading only: symlinks of the existing part are
 * followed inside the root (the last component's only with `followLast`); from the first
 * missing or non-directory component on, the rest is taken as written. Never throws for
 * a missing or non-directory parent (the write itself reports that).
 */
export function realPathInRoot(root: string, p: string, followLast = false, io: TreeReader = hostIo, knownDirs?: Set<string>): string {
  const queue = splitSourcePath(p, 'path', { allowBackslash: true });
  const stack: string[] = [];
  const hostOf = (parts: string[]): string => (parts.length === 0 ? root : `${root}/${parts.join('/')}`);
  let hops = 0;
  while (queue.length > 0) {
    const c = queue.shift()!;
    if (c === '..') {
      stack.pop();
      continue;
    }
    // A known real directory that is not the last component (see ResolveOptions.knownDirs);
    // the last one not followed is taken as it is, whatever it is.
    if (knownDirs !== undefined && ((queue.length === 0 && !followLast) || (queue.length > 0 && knownDirs.has(stack.length === 0 ? c : `${stack.join('/')}/${c}`)))) {
      stack.push(c);
      continue;
    }
    let st: fs.Stats | null;
    try {
      st = io.lstat(hostOf([...stack, c]));
    } catch {
      st = null;
    }
    if (st !== null && st.isSymbolicLink() && (queue.length > 0 || followLast) && ++hops <= MAX_SYMLINK_HOPS) {
      const target = io.readlink(hostOf([...stack, c]));
      if (target.startsWith('/')) stack.length = 0;
      queue.unshift(...target.split('/').filter((x) => x !== '' && x !== '.'));
      continue;
    }
    stack.push(c);
    if (st === null || !st.isDirectory()) return [...stack, ...queue].join('/');
  }
  return stack.join('/');
}
