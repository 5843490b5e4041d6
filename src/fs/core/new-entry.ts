import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import type { FaultHook } from './faults.js';
import { ioError } from './io-error.js';

/**
 * The calls that make a new entry in a tree, shared by RootFs (through hostIo) and the
 * tree copies (copy-tree.ts, copy-entry.ts): a new name only, never written through a
 * symlink. A file is created O_EXCL|O_NOFOLLOW, a clone with COPYFILE_EXCL (a name that
 * exists, a symlink included, is EEXIST: nothing is truncated or followed); mkdir,
 * link, symlink and mkfifo refuse an existing name by themselves. A source file is opened
 * O_NOFOLLOW and must still be a regular file. When the entry becomes durable is the
 * caller's policy: an fsync of each (RootFs's 'each', copyOut) or one syncfs of the
 * whole tree once it is built (a deployment's tree, discarded whole after a crash).
 */
const CREATE = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;

/** A new regular file (mode before the umask; the caller sets the final one), open for writing. */
export function createFile(host: string | Buffer, mode = 0o600): number {
  return fs.openSync(host, CREATE, mode);
}

/** A new file at `dst` sharing `src`'s blocks where the filesystem can (FICLONE), else a copy of its bytes. */
export function cloneFile(src: string | Buffer, dst: string | Buffer): void {
  fs.copyFileSync(src, dst, fs.constants.COPYFILE_EXCL | fs.constants.COPYFILE_FICLONE);
}

/**
 * A new file of the sysroot's own (a manifest's overlay or summary) holding `data`: created
 * O_EXCL|O_NOFOLLOW, written whole, not fsynced (the caller's sync step makes it durable).
 */
export function writeNewFile(file: string, data: Buffer, faults: FaultHook, mode = 0o644): void {
  let fd: number;
  try {
    fd = fs.openSync(file, CREATE, mode);
  } catch (err) {
    throw ioError(err, file, file, 'sysroot');
  }
  try {
    faults.afterMutation('create', file);
    try {
      for (let off = 0; off < data.length; ) off += fs.writeSync(fd, data, off, data.length - off);
    } catch (err) {
      throw ioError(err, file, file, 'sysroot');
    }
    faults.afterMutation('write', file);
  } finally {
    fs.closeSync(fd);
  }
}

const CHUNK = 1 << 20;

/**
 * Copies the bytes of a regular file into an open descriptor, in chunks (never the whole
 * file in memory; `buf`, a caller's reused buffer, or 1 MiB). Returns the bytes copied.
 * Not a clone: copy_file_range(2), which fs.copyFileSync uses, is a reflink on XFS and
 * btrfs, so the copy would share its blocks with the source after all.
 */
export function copyFileInto(srcHost: string | Buffer, fd: number, rel: string, buf?: Buffer): number {
  let from: number;
  try {
    from = fs.openSync(srcHost, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    throw ioError(err, rel, String(srcHost), 'sysroot');
  }
  try {
    if (!fs.fstatSync(from).isFile()) throw new StagedrootError('IO', `${rel} is no longer a regular file`, { path: rel, resolvedPath: String(srcHost) });
    const b = buf ?? Buffer.allocUnsafe(CHUNK);
    let total = 0;
    for (let n = fs.readSync(from, b, 0, b.length, null); n > 0; n = fs.readSync(from, b, 0, b.length, null)) {
      for (let off = 0; off < n; ) off += fs.writeSync(fd, b, off, n - off);
      total += n;
    }
    return total;
  } finally {
    fs.closeSync(from);
  }
}
