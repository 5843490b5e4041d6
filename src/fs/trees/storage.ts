import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import type { FaultHook } from '../core/faults.js';
import { filesystemIs } from '../core/host-paths.js';
import { ioError } from '../core/io-error.js';

/**
 * How deployment trees are stored. `btrfs`: each tree is a btrfs subvolume, and a stage
 * starts from a snapshot of the booted one (O(1) in the tree size; the files share
 * extents, not inodes). `portable`: plain directories, the booted tree hardlinked
 * (usr/) or reflinked/copied into a new one (any filesystem).
 */
export type StorageKind = 'btrfs' | 'portable';

/** `auto`: btrfs subvolumes where the sysroot is on btrfs and btrfs-progs is installed. */
export type StoragePreference = 'auto' | 'portable';

const BTRFS_SUPER_MAGIC = 0x9123683e;
/** The inode number of a btrfs subvolume's root directory. */
const BTRFS_FIRST_FREE_OBJECTID = 256;

export function isBtrfs(p: string): boolean {
  return filesystemIs(p, BTRFS_SUPER_MAGIC);
}

/** True when `p` is the root of a btrfs subvolume (a directory with inode 256 on btrfs). */
export function isSubvolume(p: string): boolean {
  try {
    const st = fs.lstatSync(p);
    return st.isDirectory() && st.ino === BTRFS_FIRST_FREE_OBJECTID && isBtrfs(p);
  } catch {
    return false;
  }
}

let btrfsTool: boolean | undefined;
/** Whether `btrfs` (btrfs-progs) is on the PATH: looked up, not run (no process start on the caller's thread). */
function hasBtrfsTool(): boolean {
  btrfsTool ??= (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':').some((d) => {
    try {
      fs.accessSync(`${d || '.'}/btrfs`, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  return btrfsTool;
}

/** Checks a storage preference from an option or STAGEDROOT_STORAGE. */
export function parseStoragePreference(v: unknown, option = 'storage'): StoragePreference {
  if (v === undefined || v === '' || v === 'auto') return 'auto';
  if (v === 'portable') return 'portable';
  throw new StagedrootError('USAGE', `Expected ${option} to be "auto" or "portable", got ${JSON.stringify(v)}`, { option, value: v });
}

/** The storage new trees of the sysroot at `root` get (statfs, and btrfs-progs to drive it). */
export function storageKind(root: string, pref: StoragePreference): StorageKind {
  return pref === 'auto' && isBtrfs(root) && hasBtrfsTool() ? 'btrfs' : 'portable';
}

/** True when a new tree can start as a snapshot of `baseTree` (btrfs storage, and the base is a subvolume). */
export function snapshotsFrom(root: string, pref: StoragePreference, baseTree: string): boolean {
  return storageKind(root, pref) === 'btrfs' && isSubvolume(baseTree);
}

/** `btrfs ARGS`, synchronously (on a tree worker: see snapshotTreeNow). */
function btrfsNow(args: string[], what: string, path: string): void {
  const r = spawnSync('btrfs', args, { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.error === undefined && r.status === 0) return;
  const stderr = String(r.stderr ?? '');
  const errno = /No space left/i.test(stderr) ? 'ENOSPC' : undefined;
  throw ioError(Object.assign(new Error(`btrfs ${args.join(' ')}: ${stderr.trim() || r.error?.message || `exit code ${r.status}`}`), errno ? { code: errno } : {}), what, path, 'sysroot');
}

/**
 * Snapshots the subvolume `src` at `dst`, synchronously: the tree task snapshotTree runs
 * it on a worker thread, so the fork of btrfs(8) does not stall the caller's event loop.
 */
export function snapshotTreeNow(src: string, dst: string, faults: FaultHook): void {
  btrfsNow(['subvolume', 'snapshot', src, dst], dst, dst);
  faults.afterMutation('snapshot', dst);
}

/** Makes a new, empty deployment tree: a btrfs subvolume, or a plain directory (the tree task makeTree). */
export function makeTreeNow(kind: StorageKind, path: string, faults: FaultHook): void {
  if (kind === 'btrfs') {
    btrfsNow(['subvolume', 'create', path], path, path);
  } else {
    try {
      fs.mkdirSync(path, { mode: 0o755 });
    } catch (err) {
      throw ioError(err, path, path, 'sysroot');
    }
  }
  faults.afterMutation('mkdir', path);
}

/**
 * Deletes the subvolumes at `p` and `p/tree` (a deployment or work directory) with
 * `btrfs subvolume delete`, O(1) for the caller: the filesystem reclaims the blocks in
 * the background. What is left (or everything, off btrfs) is then removed file by file.
 * Synchronous: it runs on a tree worker (see removeTreeNow).
 */
export function deleteSubvolumesIn(p: string): void {
  for (const sv of [`${p}/tree`, p]) {
    if (!isSubvolume(sv) || !hasBtrfsTool()) continue;
    const r = spawnSync('btrfs', ['subvolume', 'delete', sv], { encoding: 'utf8' });
    // Refused (no privileges, an old kernel): the file-by-file removal that follows still empties it.
    if (r.status !== 0 && fs.existsSync(sv)) continue;
  }
}
