import * as fs from 'node:fs';
import * as path from 'node:path';
import { StagedrootError, errnoOf } from '../../errors.js';
import { fsyncDir } from '../core/fsync-dir.js';
import { ioError } from '../core/io-error.js';

/**
 * A file being fetched (a blob from a registry), written as its bytes
 * arrive. It lives under its own name beside its place (`DEST.partial`), so that what a
 * cut connection or a killed process leaves can be resumed, and becomes the file at
 * `DEST` only through `commit` (fsync, one rename, fsync of the directory) once the
 * caller has verified it whole: a half-fetched file is never found at `DEST`.
 */
export class PartialFile {
  private constructor(
    readonly path: string,
    private fh: fs.promises.FileHandle | null,
    private bytes: number,
  ) {}

  /** Opens (or creates) `dest`'s partial file, keeping what an earlier fetch left. */
  static async open(dest: string): Promise<PartialFile> {
    const p = `${dest}.partial`;
    try {
      await fs.promises.mkdir(path.dirname(p), { recursive: true });
      const fh = await fs.promises.open(p, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND | fs.constants.O_NOFOLLOW, 0o644);
      const st = await fh.stat();
      if (!st.isFile()) {
        await fh.close();
        throw new StagedrootError('IO', `${p} is not a regular file`, { path: p });
      }
      return new PartialFile(p, fh, st.size);
    } catch (err) {
      throw ioError(err, p, p, 'sysroot');
    }
  }

  /** The bytes it holds. */
  get size(): number {
    return this.bytes;
  }

  private handle(): fs.promises.FileHandle {
    if (this.fh === null) throw new StagedrootError('IO', `${this.path} is closed`, { path: this.path });
    return this.fh;
  }

  /**
   * Appends a chunk (of a blob as it arrives, or a whole manifest), written before the
   * next is read: what a cut connection or a kill leaves is exactly what was received.
   * Synchronous: into the page cache a network chunk (64 KiB) takes tens of
   * microseconds, less than a trip through the threadpool and the main thread's wait for
   * it, which on a loaded machine is a wake-up per chunk.
   */
  appendSync(chunk: Uint8Array): void {
    const fd = this.handle().fd;
    try {
      for (let off = 0; off < chunk.length; ) off += fs.writeSync(fd, chunk, off, chunk.length - off);
    } catch (err) {
      throw ioError(err, this.path, this.path, 'sysroot');
    }
    this.bytes += chunk.length;
  }

  /** Starts over: nothing kept. */
  async truncate(): Promise<void> {
    try {
      await this.handle().truncate(0);
    } catch (err) {
      throw ioError(err, this.path, this.path, 'sysroot');
    }
    this.bytes = 0;
  }

  /** What it holds, in chunks (to hash again what an earlier fetch left before resuming). */
  async *chunks(): AsyncGenerator<Buffer> {
    let fh: fs.promises.FileHandle;
    try {
      fh = await fs.promises.open(this.path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    } catch (err) {
      throw ioError(err, this.path, this.path, 'sysroot');
    }
    try {
      for (let pos = 0; pos < this.bytes; ) {
        const buf = Buffer.allocUnsafe(Math.min(256 * 1024, this.bytes - pos));
        const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
        if (bytesRead === 0) return;
        pos += bytesRead;
        yield buf.subarray(0, bytesRead);
      }
    } finally {
      await fh.close();
    }
  }

  /** Makes it the file at `dest`: fsync, rename, fsync of the directory. */
  async commit(dest: string): Promise<void> {
    const fh = this.handle();
    try {
      await fh.sync();
      await fh.close();
      this.fh = null;
      await fs.promises.rename(this.path, dest);
      fsyncDir(path.dirname(dest));
    } catch (err) {
      throw ioError(err, dest, this.path, 'sysroot');
    }
  }

  /** Closes it, keeping its bytes for a resume. */
  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close().catch(() => {});
  }

  /** Closes and removes it (its bytes are known bad). */
  async discard(): Promise<void> {
    await this.close();
    await fs.promises.unlink(this.path).catch((err: unknown) => {
      if (errnoOf(err) !== 'ENOENT') throw ioError(err, this.path, this.path, 'sysroot');
    });
  }
}

/** Removes a file (a blob found corrupt), missing or not. */
export async function removeFile(p: string): Promise<void> {
  try {
    await fs.promises.unlink(p);
    fsyncDir(path.dirname(p));
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw ioError(err, p, p, 'sysroot');
  }
}

/** The size of a regular file at `p`, or null when there is none (async: no stall of the event loop). */
export async function fileSize(p: string): Promise<number | null> {
  try {
    const st = await fs.promises.stat(p);
    return st.isFile() ? st.size : null;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return null;
    throw ioError(err, p, p, 'sysroot');
  }
}

/** The names in a directory, or [] when it does not exist (async). */
export async function listDirAsync(p: string): Promise<string[]> {
  try {
    return (await fs.promises.readdir(p)).sort();
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return [];
    throw ioError(err, p, p, 'sysroot');
  }
}

/**
 * A small file (a credentials file, a certificate) read in chunks, refused past `max`
 * bytes; null when it does not exist.
 */
export async function readSmallFile(p: string, max: number): Promise<Buffer | null> {
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(p, fs.constants.O_RDONLY);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return null;
    throw ioError(err, p, p, 'sysroot');
  }
  try {
    const parts: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(64 * 1024);
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > max) throw new StagedrootError('UNSAFE_ENTRY', `${p} is more than the ${max} bytes allowed`, { path: p });
      parts.push(buf.subarray(0, bytesRead));
    }
    return Buffer.concat(parts);
  } catch (err) {
    throw ioError(err, p, p, 'sysroot');
  } finally {
    await fh.close();
  }
}
