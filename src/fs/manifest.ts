import * as fs from 'node:fs';
import { z } from 'zod';
import { StagedrootError } from '../errors.js';
import { noFaults, type FaultHook } from './faults.js';
import { comparePaths } from './paths.js';

/**
 * A manifest lists every entry of a deployment's tree, one JSON object per line, in
 * depth-first order with sorted children (see comparePaths). Two manifests, or a
 * manifest and a tree walk, are compared in one streaming pass: nothing is loaded whole.
 */
export const manifestEntrySchema = z
  .object({
    p: z.string().min(1), // tree-relative path
    t: z.enum(['f', 'd', 'l', 'o']), // file, directory, symlink, other
    m: z.number().int().min(0).max(0o7777), // permission bits
    u: z.number().int().min(0),
    g: z.number().int().min(0),
    s: z.number().int().min(0).optional(), // size of a regular file
    h: z.string().regex(/^[0-9a-f]{64}$/).optional(), // sha256 of a regular file
    l: z.string().optional(), // symlink target
    mt: z.number().int().optional(), // mtime in ms (a cache key for re-hashing, not compared)
  })
  .strict();

export type ManifestEntry = z.infer<typeof manifestEntrySchema>;

const TYPE_NAMES: Record<ManifestEntry['t'], string> = { f: 'file', d: 'directory', l: 'symlink', o: 'other' };
export function typeName(t: ManifestEntry['t']): string {
  return TYPE_NAMES[t];
}

export function entryFromStat(rel: string, st: fs.Stats, extra: { h?: string; l?: string }): ManifestEntry {
  const t: ManifestEntry['t'] = st.isFile() ? 'f' : st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'o';
  const e: ManifestEntry = { p: rel, t, m: st.mode & 0o7777, u: st.uid, g: st.gid };
  if (t === 'f') {
    e.s = st.size;
    if (extra.h !== undefined) e.h = extra.h;
    e.mt = Math.trunc(st.mtimeMs);
  }
  if (t === 'l' && extra.l !== undefined) e.l = extra.l;
  return e;
}

/** Writes manifest lines through a 1 MiB buffer. */
export class ManifestWriter {
  private fd: number;
  private pending: string[] = [];
  private pendingBytes = 0;
  count = 0;
  private last: string | null = null;

  constructor(readonly file: string, private readonly faults: FaultHook = noFaults) {
    this.fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW, 0o644);
    faults.afterMutation('create', file);
  }

  write(e: ManifestEntry): void {
    if (this.last !== null && comparePaths(this.last, e.p) >= 0) {
      throw new StagedrootError('IO', `Manifest out of order: ${e.p} after ${this.last}`, { path: e.p });
    }
    this.last = e.p;
    const line = JSON.stringify(e) + '\n';
    this.pending.push(line);
    this.pendingBytes += line.length;
    this.count += 1;
    if (this.pendingBytes > 1 << 20) this.flush();
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    fs.writeSync(this.fd, this.pending.join(''));
    this.faults.afterMutation('write', this.file);
    this.pending = [];
    this.pendingBytes = 0;
  }

  /** Flushes, fsyncs and closes. */
  close(durable = true): void {
    this.flush();
    if (durable) fs.fsyncSync(this.fd);
    fs.closeSync(this.fd);
  }
}

/** Reads manifest lines in order, synchronously, in 1 MiB chunks; each line checked with zod. */
export class ManifestReader {
  private fd: number | null;
  private buf = Buffer.allocUnsafe(1 << 20);
  private rest = '';
  private lines: string[] = [];
  private idx = 0;
  private eof = false;
  private lineNo = 0;
  private peeked: ManifestEntry | null | undefined = undefined;

  constructor(readonly file: string) {
    try {
      this.fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    } catch (err) {
      throw new StagedrootError('STATE_CORRUPT', `Cannot open manifest ${file}: ${(err as Error).message}`, { path: file, cause: err });
    }
  }

  /** The next entry without consuming it. */
  peek(): ManifestEntry | null {
    if (this.peeked === undefined) this.peeked = this.read();
    return this.peeked;
  }

  next(): ManifestEntry | null {
    const e = this.peek();
    this.peeked = undefined;
    return e;
  }

  /** Advances to `p` and returns its entry, or null when the manifest has none (entries before it are skipped). */
  seek(p: string): ManifestEntry | null {
    for (;;) {
      const e = this.peek();
      if (e === null) return null;
      const c = comparePaths(e.p, p);
      if (c === 0) return this.next();
      if (c > 0) return null;
      this.next();
    }
  }

  private read(): ManifestEntry | null {
    for (;;) {
      if (this.idx < this.lines.length) {
        const line = this.lines[this.idx++]!;
        this.lineNo += 1;
        if (line === '') continue;
        return this.parse(line);
      }
      if (this.eof || this.fd === null) {
        if (this.rest !== '') {
          const line = this.rest;
          this.rest = '';
          this.lineNo += 1;
          return this.parse(line);
        }
        this.close();
        return null;
      }
      const n = fs.readSync(this.fd, this.buf, 0, this.buf.length, null);
      if (n === 0) {
        this.eof = true;
        continue;
      }
      const text = this.rest + this.buf.toString('utf8', 0, n);
      const parts = text.split('\n');
      this.rest = parts.pop()!;
      this.lines = parts;
      this.idx = 0;
    }
  }

  private parse(line: string): ManifestEntry {
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      throw new StagedrootError('STATE_CORRUPT', `Manifest ${this.file} line ${this.lineNo} is not JSON`, { path: this.file, cause: err });
    }
    const r = manifestEntrySchema.safeParse(raw);
    if (!r.success) {
      throw new StagedrootError('STATE_CORRUPT', `Manifest ${this.file} line ${this.lineNo} is invalid: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`, { path: this.file });
    }
    return r.data;
  }

  close(): void {
    if (this.fd !== null) {
      fs.closeSync(this.fd);
      this.fd = null;
    }
  }
}

/** Iterates a manifest file (for callers that want every entry). */
export function* readManifest(file: string): Generator<ManifestEntry> {
  const r = new ManifestReader(file);
  try {
    for (let e = r.next(); e !== null; e = r.next()) yield e;
  } finally {
    r.close();
  }
}
