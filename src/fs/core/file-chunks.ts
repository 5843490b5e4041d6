import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { ioError } from './io-error.js';

const CHUNK = 256 * 1024;

/**
 * A source file (an archive) opened and read in chunks. `identity` (from fstat) lets a
 * two-pass reader make sure its second pass reads the very file the first one checked
 * (a rename or replace of the path changes the inode, an in-place rewrite the ctime),
 * and `assertUnchanged` checks the same after reading: a file edited while it is being
 * staged is rejected instead of applied half-checked.
 */
export class SourceFile {
  private constructor(
    readonly path: string,
    private readonly fd: number,
    /** dev, inode, size, mtime and ctime: equal only for the same, unmodified file. */
    readonly identity: string,
    readonly size: number,
  ) {}

  static open(p: string): SourceFile {
    let fd: number;
    try {
      fd = fs.openSync(p, fs.constants.O_RDONLY);
    } catch (err) {
      throw ioError(err, p, p);
    }
    const st = fs.fstatSync(fd);
    if (!st.isFile()) {
      fs.closeSync(fd);
      throw new StagedrootError('USAGE', `The source ${p} is not a regular file`, { value: p });
    }
    return new SourceFile(p, fd, fingerprint(st), st.size);
  }

  /** The first `n` bytes (fewer when the file is shorter). */
  head(n: number): Buffer {
    const buf = Buffer.alloc(n);
    const got = fs.readSync(this.fd, buf, 0, n, 0);
    return buf.subarray(0, got);
  }

  /** `n` bytes from `offset` (fewer at the end of the file). */
  headAt(offset: number, n: number): Buffer {
    const buf = Buffer.alloc(n);
    const got = fs.readSync(this.fd, buf, 0, n, offset);
    return buf.subarray(0, got);
  }

  /**
   * The file from `start` (default 0) to `end` (default: its end), a fresh buffer per
   * chunk (callers may keep slices).
   */
  async *chunks(start = 0, end = Infinity): AsyncGenerator<Buffer> {
    let pos = start;
    for (;;) {
      const want = Math.min(CHUNK, end - pos);
      if (want <= 0) return;
      const buf = Buffer.allocUnsafe(want);
      const n = await new Promise<number>((resolve, reject) => fs.read(this.fd, buf, 0, want, pos, (err, got) => (err ? reject(ioError(err, this.path, this.path)) : resolve(got))));
      if (n === 0) return;
      pos += n;
      yield n === want ? buf : buf.subarray(0, n);
    }
  }

  assertUnchanged(): void {
    if (fingerprint(fs.fstatSync(this.fd)) !== this.identity) {
      throw new StagedrootError('SOURCE_CORRUPT', `The source ${this.path} changed while it was being staged`, { path: this.path });
    }
  }

  close(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

function fingerprint(st: fs.Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}
