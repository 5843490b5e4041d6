import * as fs from 'node:fs';
import * as path from 'node:path';
import { StagedrootError, errnoOf } from '../../errors.js';
import { ioError } from './io-error.js';

/*
 * Reads of host paths outside any tree (the sysroot's own files, a boot directory, a
 * source's files): existence, text, links, listings, stats, free space. Nothing here
 * writes; a tree is read through ReadOnlyTree, written through RootFs, and the sysroot's
 * own state through DurableFs (fs/trees/durable.ts).
 */

export function exists(p: string): boolean {
  try {
    // No error built for a missing name (the common answer: a store object not there yet).
    return fs.lstatSync(p, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

export function readText(p: string): string | null {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(err, p, p, 'sysroot');
  }
}

export function readLink(p: string): string | null {
  try {
    return fs.readlinkSync(p);
  } catch (err) {
    const e = errnoOf(err);
    if (e === 'ENOENT' || e === 'EINVAL') return null;
    throw ioError(err, p, p, 'sysroot');
  }
}

export function listDir(p: string): string[] {
  try {
    return fs.readdirSync(p).sort();
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return [];
    throw ioError(err, p, p, 'sysroot');
  }
}

export function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** True when the filesystem holding `p` has statfs(2)'s f_type `magic`; false when it cannot be told. */
export function filesystemIs(p: string, magic: number): boolean {
  try {
    return fs.statfsSync(p).type === magic;
  } catch {
    return false;
  }
}

/** Free and total bytes of the filesystem holding `p` (statfs). */
export function freeSpace(p: string): { free: number; total: number } {
  const s = fs.statfsSync(p);
  return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
}

/**
 * Reads a file of at most `max` bytes (a guard against huge inputs), or null when absent.
 * The size it says is checked first, then at most `max` + 1 bytes are read: a file that
 * grows meanwhile, or says less than it gives (a FIFO, a /proc file), is refused too.
 */
export function readBytes(file: string, max: number): Buffer | null {
  let fd: number;
  let size: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(err, file, file, 'sysroot');
  }
  try {
    try {
      size = fs.fstatSync(fd).size;
    } catch (err) {
      throw ioError(err, file, file, 'sysroot');
    }
    if (size > max) {
      throw new StagedrootError('UNSAFE_ENTRY', `${file} is ${size} bytes, more than the ${max} allowed`, { path: file });
    }
    const parts: Buffer[] = [];
    let total = 0;
    while (total <= max) {
      const buf = Buffer.allocUnsafe(Math.min(max + 1 - total, Math.max(size - total + 1, 64 * 1024), 1 << 20));
      const got = fs.readSync(fd, buf, 0, buf.length, null);
      if (got === 0) return Buffer.concat(parts, total);
      parts.push(buf.subarray(0, got));
      total += got;
    }
    throw new StagedrootError('UNSAFE_ENTRY', `${file} is more than the ${max} bytes allowed (it gave more than its size, ${size}, said)`, { path: file });
  } finally {
    fs.closeSync(fd);
  }
}

/** The first bytes of a file (for detecting its kind). */
export function readHead(file: string, n: number): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(n);
    const got = fs.readSync(fd, buf, 0, n, 0);
    return buf.subarray(0, got);
  } finally {
    fs.closeSync(fd);
  }
}

export function statPath(p: string): fs.Stats | null {
  try {
    return fs.statSync(p, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}

/**
 * The nearest existing directory at or above `p` (never above `stop`), and whether this
 * process may create entries in it: EROFS (a read-only mount, such as the booted /usr of
 * a deployment) and EACCES both say no. Read only: nothing is written.
 */
export function writableAt(p: string, stop: string): { dir: string; writable: boolean; errno?: string } {
  let dir = p;
  while (dir !== stop && dir !== '/' && !isDirectory(dir)) dir = path.dirname(dir);
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return { dir, writable: true };
  } catch (err) {
    return { dir, writable: false, errno: (err as NodeJS.ErrnoException).code };
  }
}

/** The path's own stat (a symlink is not followed), or null when it does not exist. */
export function lstatPath(p: string | Buffer): fs.Stats | null {
  try {
    return fs.lstatSync(p, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}
