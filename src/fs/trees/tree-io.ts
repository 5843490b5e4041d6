import * as fs from 'node:fs';
import { errnoOf } from '../../errors.js';
import { fsyncDir } from '../core/fsync-dir.js';
import { copyFileInto } from './copy-entry.js';
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
  lstat(host) {
    try {
      return fs.lstatSync(B(host));
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return null;
      throw err;
    }
  },
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
  create: (host, mode) => fs.openSync(B(host), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, mode),
  write: (fd, data, off, len) => fs.writeSync(fd, data, off, len),
  copyInto: (src, fd, rel) => copyFileInto(src, fd, rel),
  fchown: (fd, uid, gid) => fs.fchownSync(fd, uid, gid),
  fchmod: (fd, mode) => fs.fchmodSync(fd, mode),
  futimes: (fd, time) => fs.futimesSync(fd, time, time),
  fsync: (fd) => fs.fsyncSync(fd),
  close: (fd) => fs.closeSync(fd),
  rename: (from, to) => fs.renameSync(B(from), B(to)),
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
