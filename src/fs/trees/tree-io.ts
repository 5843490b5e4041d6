import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { errnoOf } from '../../errors.js';
import { fsyncDir } from '../core/fsync-dir.js';
import { copyOut } from './copy-entry.js';
import { copyFileInto, createFile } from '../core/new-entry.js';
import { noFaults } from '../core/faults.js';
import { commitViaTemp } from './write-via-temp.js';
import { readLinkTarget } from '../manifests/manifest.js';
import { bytesOfName, hasRawBytes } from '../core/names.js';
import { makeFifo } from '../core/path-tool.js';
import { readNames } from '../core/walk.js';
import { readXattrs, replaceXattrs, writeXattrs, type XattrWriteOptions, type Xattrs } from '../core/xattr.js';

/**
 * The system calls the safe-fs layer (RootFs, ReadOnlyTree, resolveInRoot) makes on the
 * host paths of a tree, and nothing else: every decision (chroot resolution, what an
 * existing entry means, temp + rename) is taken above it, once. Two implementations:
 * `hostIo`, the disk itself, and OverlayIo (overlay-io.ts), an in-memory layer over a
 * tree that is only read, which `stage --dry-run` applies an update to, so the dry run
 * runs the stage's own code and cannot drift from it.
 *
 * Host paths are strings in which a name that is not UTF-8 is escaped (names.ts); the
 * implementation hands its bytes to the syscall. Errors are Node's (with `code`).
 */
export interface TreeReader {
  /** lstat, or null when nothing is there (ENOENT). */
  lstat(host: string): fs.Stats | null;
  readlink(host: string): string;
  /** Sorted names of a directory. */
  readdir(host: string): string[];
  /** A regular file's bytes (not following a final symlink). */
  readFile(host: string): Buffer;
  readXattrs(host: string): Xattrs;
}

export interface TreeIo extends TreeReader {

  mkdir(host: string, mode: number): void;
  /** Creates a new file (O_EXCL, not following a symlink); returns its descriptor. */
  create(host: string, mode: number): number;
  write(fd: number, data: Uint8Array, off: number, len: number): number;
  /** Copies the bytes of a regular file outside the tree (a source's) into `fd`. */
  copyInto(srcHost: string | Buffer, fd: number, rel: string): number;
  fchown(fd: number, uid: number, gid: number): void;
  fchmod(fd: number, mode: number): void;
  futimes(fd: number, time: number): void;
  fsync(fd: number): void;
  close(fd: number): void;

  rename(from: string, to: string): void;
  /**
   * Moves an entry out of the tree to a host path outside it (on the disk: one rename,
   * or across filesystems a copy that keeps everything `cp -a` keeps, then the original
   * goes). Names are bytes at both ends.
   */
  moveOut(host: string, hostDst: string): void;
  unlink(host: string): void;
  /** Removes a directory with everything below it (or any entry). */
  removeTree(host: string): void;
  symlink(target: string, host: string): void;
  link(existing: string, host: string): void;
  /** Copies a file of the tree to a new inode beside it. */
  copyFile(src: string, dst: string): void;
  mkfifo(host: string, mode: number, rel: string): void;
  lchown(host: string, uid: number, gid: number): void;
  chmod(host: string, mode: number): void;
  utimes(host: string, time: number): void;
  writeXattrs(host: string, attrs: Xattrs, o: XattrWriteOptions): Xattrs;
  replaceXattrs(host: string, attrs: Xattrs, o: XattrWriteOptions): Xattrs;
  fsyncDir(dir: string): void;
}

/** A host path at the syscall: a name that is not UTF-8 gets its bytes. */
export const B = (host: string): string | Buffer => (hasRawBytes(host) ? bytesOfName(host) : host);

/** The disk. */
export const hostIo: TreeIo = {
  // An absent entry without an exception (Node builds an Error with its stack for each: ~15 µs,
  // at every new path a plan resolves or an apply writes); any other error still throws.
  lstat: (host) => fs.lstatSync(B(host), { throwIfNoEntry: false }) ?? null,
  readlink: (host) => readLinkTarget(B(host)),
  readdir: (host) => readNames(B(host)),
  readFile(host) {
    const fd = fs.openSync(B(host), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      return fs.readFileSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  },
  readXattrs: (host) => readXattrs(B(host)),
  mkdir: (host, mode) => void fs.mkdirSync(B(host), { mode }),
  create: (host, mode) => createFile(B(host), mode),
  write: (fd, data, off, len) => fs.writeSync(fd, data, off, len),
  copyInto: (src, fd, rel) => copyFileInto(src, fd, rel),
  fchown: (fd, uid, gid) => fs.fchownSync(fd, uid, gid),
  fchmod: (fd, mode) => fs.fchmodSync(fd, mode),
  futimes: (fd, time) => fs.futimesSync(fd, time, time),
  fsync: (fd) => fs.fsyncSync(fd),
  close: (fd) => fs.closeSync(fd),
  rename: (from, to) => fs.renameSync(B(from), B(to)),
  moveOut: (host, hostDst) => moveAcross(host, hostDst),
  unlink: (host) => fs.unlinkSync(B(host)),
  removeTree: (host) => fs.rmSync(B(host), { recursive: true, force: true }),
  symlink: (target, host) => fs.symlinkSync(B(target), B(host)),
  link: (existing, host) => fs.linkSync(B(existing), B(host)),
  copyFile: (src, dst) => fs.copyFileSync(B(src), B(dst)),
  mkfifo: (host, mode, rel) => makeFifo(B(host), mode, rel),
  lchown: (host, uid, gid) => fs.lchownSync(B(host), uid, gid),
  chmod: (host, mode) => fs.chmodSync(B(host), mode),
  utimes: (host, time) => fs.utimesSync(B(host), time, time),
  writeXattrs: (host, attrs, o) => writeXattrs(B(host), attrs, o),
  replaceXattrs: (host, attrs, o) => replaceXattrs(B(host), attrs, o),
  fsyncDir: (dir) => fsyncDir(dir),
};

/**
 * A rename out of the tree; across filesystems (the tree is a btrfs subvolume, see
 * storage.ts: no rename leaves it) a copy that keeps owners, modes, times, hardlinks,
 * FIFOs and extended attributes, then the original goes. The copy is `cp -a`, handed the
 * two directories as open descriptors (/dev/fd/N) so that no name goes through argv,
 * which cannot carry a name that is not UTF-8: the source directory's content is copied
 * to a temp name in the destination's directory, renamed into place once complete. A
 * non-directory is copied by copyOut (byte paths, attributes, via a temp). A failed copy
 * removes what it made and keeps the original.
 */
function moveAcross(host: string, hostDst: string): void {
  try {
    fs.renameSync(B(host), B(hostDst));
    return;
  } catch (err) {
    if (errnoOf(err) !== 'EXDEV') throw err;
  }
  const st = fs.lstatSync(B(host));
  if (!st.isDirectory()) {
    copyOut(host, hostDst);
  } else {
    const parent = path.dirname(hostDst);
    commitViaTemp(hostDst, (tmp) => {
      const from = fs.openSync(B(host), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      try {
        const to = fs.openSync(B(parent), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
        try {
          const cp = spawnSync('cp', ['-a', '--reflink=auto', '--', '/dev/fd/3/.', `/dev/fd/4/${path.basename(tmp)}`], { stdio: ['ignore', 'pipe', 'pipe', from, to], encoding: 'utf8' });
          if (cp.error || cp.status !== 0) throw Object.assign(new Error(`cp -a: ${(cp.error?.message ?? cp.stderr).trim()}`), { code: 'EXDEV' });
        } finally {
          fs.closeSync(to);
        }
      } finally {
        fs.closeSync(from);
      }
    }, { io: hostIo, faults: noFaults, durable: true, rel: hostDst, where: 'sysroot' });
  }
  fs.rmSync(B(host), { recursive: true, force: true });
}

/** Only the reads of `io`, as a new object: a reader holds no way to write. */
export function readerOf(io: TreeReader): TreeReader {
  return Object.freeze({
    lstat: (h: string) => io.lstat(h),
    readlink: (h: string) => io.readlink(h),
    readdir: (h: string) => io.readdir(h),
    readFile: (h: string) => io.readFile(h),
    readXattrs: (h: string) => io.readXattrs(h),
  });
}
