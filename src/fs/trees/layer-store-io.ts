import * as fs from 'node:fs';
import { errnoOf } from '../../errors.js';
import type { FaultHook } from '../core/faults.js';
import { ioError } from '../core/io-error.js';
import { B } from './tree-io.js';

/**
 * The few system calls of the layer store (src/layer-store/) that the durable layer has
 * no form of: a rename that is not fsynced (the store makes thousands of them durable
 * with one syncfs), an index written line by line, read back line by line. Everything
 * else the store does goes through DurableFs, RootFs and the durable helpers.
 */

/** Renames `from` to `to` with no fsync: the caller makes the result durable (syncFilesystem) before anything that depends on it. */
export function renameUnsynced(from: string, to: string, faults: FaultHook): void {
  try {
    fs.renameSync(B(from), B(to));
  } catch (err) {
    throw ioError(err, to, from, 'sysroot');
  }
  faults.afterMutation('rename', to);
}

/** Makes directory `dir` (mode 0700) when it is missing, with no fsync (see renameUnsynced). */
export function mkdirUnsynced(dir: string, faults: FaultHook): void {
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return;
    throw ioError(err, dir, dir, 'sysroot');
  }
  faults.afterMutation('mkdir', dir);
}

/** A new file written line by line (buffered, 1 MiB at a time), never fsynced itself (see renameUnsynced). */
export class LineWriter {
  private readonly fd: number;
  private buf = Buffer.allocUnsafe(1 << 20);
  private used = 0;
  lines = 0;

  constructor(readonly file: string, faults: FaultHook) {
    try {
      this.fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
    } catch (err) {
      throw ioError(err, file, file, 'sysroot');
    }
    faults.afterMutation('create', file);
  }

  line(s: string): void {
    const need = Buffer.byteLength(s) + 1;
    if (this.used + need > this.buf.length) this.flush();
    if (need > this.buf.length) this.buf = Buffer.allocUnsafe(need);
    this.used += this.buf.write(s, this.used);
    this.buf[this.used++] = 0x0a;
    this.lines += 1;
  }

  private flush(): void {
    for (let off = 0; off < this.used; ) off += fs.writeSync(this.fd, this.buf, off, this.used - off);
    this.used = 0;
  }

  close(): void {
    try {
      this.flush();
    } finally {
      fs.closeSync(this.fd);
    }
  }

  /** Closes without writing what is buffered (the caller is failing). */
  abandon(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

/** The lines of a file, read 1 MiB at a time (memory: one chunk and the longest line). */
export function* readLines(file: string): Generator<string> {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (err) {
    throw ioError(err, file, file, 'sysroot');
  }
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    let rest: Buffer = Buffer.alloc(0);
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      const chunk = rest.length > 0 ? Buffer.concat([rest, buf.subarray(0, n)]) : buf.subarray(0, n);
      let start = 0;
      for (let nl = chunk.indexOf(0x0a, start); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
        yield chunk.toString('utf8', start, nl);
        start = nl + 1;
      }
      rest = Buffer.from(chunk.subarray(start));
    }
    if (rest.length > 0) yield rest.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** The link count of a file (not followed), or null when it is missing. */
export function linkCount(p: string): number | null {
  try {
    return fs.lstatSync(B(p)).nlink;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw ioError(err, p, p, 'sysroot');
  }
}
