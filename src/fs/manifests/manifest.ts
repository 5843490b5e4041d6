import { isAscii } from 'node:buffer';
import { createHash, type Hash } from 'node:crypto';
import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { hashFile } from '../core/hash.js';
import { nameFromBytes } from '../core/names.js';
import { comparePaths } from '../core/paths.js';
import { readXattrs, xattrDigest } from '../core/xattr.js';
import { cheapPath, ctimeUs, formatEntry, parseManifestLine, type ManifestEntry } from './manifest-line.js';
import { overlayViewOf, type OverlayView } from './manifest-overlay.js';

/**
 * A manifest lists every entry of a deployment's tree, one JSON object per line (see
 * manifest-line.ts, the line codec), in depth-first order with sorted children (see
 * comparePaths). Two manifests, or a manifest and a tree walk, are compared in one
 * streaming pass: nothing is loaded whole.
 */

const TYPE_NAMES: Record<ManifestEntry['t'], string> = { f: 'file', d: 'directory', l: 'symlink', o: 'other' };
export function typeName(t: ManifestEntry['t']): string {
  return TYPE_NAMES[t];
}

export function entryFromStat(rel: string, st: fs.Stats, extra: { h?: string; l?: string; x?: string }): ManifestEntry {
  const t: ManifestEntry['t'] = st.isFile() ? 'f' : st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'o';
  const e: ManifestEntry = { p: rel, t, m: st.mode & 0o7777, u: st.uid, g: st.gid };
  if (t === 'f') {
    e.s = st.size;
    if (extra.h !== undefined) e.h = extra.h;
    e.mt = Math.trunc(st.mtimeMs);
    e.i = st.ino;
    e.c = ctimeUs(st);
  }
  if (t === 'l' && extra.l !== undefined) e.l = extra.l;
  // Last, so that a line without attributes is the line older versions wrote.
  if (extra.x !== undefined) e.x = extra.x;
  return e;
}

/**
 * True when the file entry `e` was recorded from this very inode and nothing changed it
 * since: size, mtime, inode number and ctime all equal. Every content change, mode,
 * owner or attribute change moves the ctime, which no user can set (size and mtime
 * alone are what `touch -r`, `cp -p` and `rsync -a` keep). A manifest written before
 * these fields were recorded (no `i`/`c`) is never taken as unchanged: hash.
 */
export function unchangedSince(e: ManifestEntry | null, st: fs.Stats): boolean {
  return e !== null && e.t === 'f' && e.h !== undefined && e.i !== undefined && e.c !== undefined && st.isFile() && e.s === st.size && e.mt === Math.trunc(st.mtimeMs) && e.i === st.ino && e.c === ctimeUs(st);
}

/** A symlink's target as a tree string (a target that is not UTF-8 keeps its bytes escaped, see names.ts). */
export function readLinkTarget(host: string | Buffer): string {
  const t = fs.readlinkSync(host);
  return t.includes('\ufffd') ? nameFromBytes(fs.readlinkSync(host, { encoding: 'buffer' })) : t;
}

/**
 * The manifest entry of what is on disk now: a file's content hashed, a symlink's
 * target read, the extended attributes digested.
 */
export function readEntry(rel: string, host: string | Buffer, st: fs.Stats): ManifestEntry {
  const x = xattrDigest(readXattrs(host));
  return entryFromStat(rel, st, st.isFile() ? { h: hashFile(host), x } : st.isSymbolicLink() ? { l: readLinkTarget(host), x } : { x });
}

/** Writes manifest lines through a 1 MiB buffer. */
export class ManifestWriter {
  private fd: number;
  // Lines are encoded straight into this buffer: no joined string, no second copy.
  private buf = Buffer.allocUnsafe(1 << 20);
  private used = 0;
  count = 0;
  private last: string | null = null;
  private readonly hash: Hash | null;
  private digest: string | null = null;

  /** `o.sha256`: hash the bytes as they are written (the manifest's sha256 without reading it back). */
  constructor(readonly file: string, private readonly faults: FaultHook = noFaults, o: { sha256?: boolean } = {}) {
    this.fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o644);
    // A manifest file with a second link is shared by two deployments (see
    // linked-manifest.ts): writing it in place would change the other's manifest too.
    if (fs.fstatSync(this.fd).nlink > 1) {
      fs.closeSync(this.fd);
      throw new StagedrootError('IO', `Refusing to write the manifest ${file} in place: another deployment's manifest is the same file (a link); a manifest is written to a new file and renamed`, { path: file });
    }
    fs.ftruncateSync(this.fd, 0);
    faults.afterMutation('create', file);
    this.hash = o.sha256 ? createHash('sha256') : null;
  }

  /** The sha256 of everything written, once closed (a writer made with `sha256: true`). */
  sha256(): string {
    if (this.digest === null) throw new Error(`ManifestWriter.sha256() of ${this.file}: not closed, or made without sha256`);
    return this.digest;
  }

  write(e: ManifestEntry): void {
    this.writeLine(e.p, formatEntry(e));
  }

  /** Writes a line already in the writer's format (JSON.stringify of an entry, or such a line reused whole). */
  writeLine(p: string, line: string): void {
    if (this.last !== null && comparePaths(this.last, p) >= 0) {
      throw new StagedrootError('IO', `Manifest out of order: ${p} after ${this.last}`, { path: p });
    }
    this.last = p;
    this.count += 1;
    // A UTF-16 unit takes at most 3 bytes in UTF-8.
    if (this.used + line.length * 3 + 1 > this.buf.length) {
      this.flush();
      if (line.length * 3 + 1 > this.buf.length) {
        this.writeAll(Buffer.from(line + '\n', 'utf8'));
        return;
      }
    }
    this.used += this.buf.write(line, this.used, 'utf8');
    this.buf[this.used++] = 0x0a;
  }

  /**
   * Writes whole lines copied byte for byte from another manifest in the same format
   * (see ManifestCursor.copyRun): `lines` lines from `first` to `last`, in order.
   */
  writeRaw(bytes: Buffer, lines: number, first: string, last: string): void {
    if (lines === 0) return;
    if (this.last !== null && comparePaths(this.last, first) >= 0) {
      throw new StagedrootError('IO', `Manifest out of order: ${first} after ${this.last}`, { path: first });
    }
    this.last = last;
    this.count += lines;
    if (this.used + bytes.length > this.buf.length) {
      this.flush();
      if (bytes.length > this.buf.length) {
        this.writeAll(bytes);
        return;
      }
    }
    this.used += bytes.copy(this.buf, this.used);
  }

  private flush(): void {
    if (this.used === 0) return;
    this.writeAll(this.buf.subarray(0, this.used));
    this.faults.afterMutation('write', this.file);
    this.used = 0;
  }

  private writeAll(data: Buffer): void {
    this.hash?.update(data);
    for (let off = 0; off < data.length; ) off += fs.writeSync(this.fd, data, off, data.length - off);
  }

  /** Flushes, fsyncs and closes. */
  close(durable = true): void {
    this.flush();
    if (durable) fs.fsyncSync(this.fd);
    fs.closeSync(this.fd);
    if (this.hash !== null) this.digest = this.hash.digest('hex');
  }
}

/** UTF-8 text of whole lines; pure ASCII (the usual case) takes the cheaper one-byte path. */
export function decode(bytes: Buffer): string {
  return isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8');
}

/** One manifest line with its path, read without parsing the rest; `entry` once parsed. */
export interface RawLine {
  p: string;
  line: string;
  lineNo: number;
  entry?: ManifestEntry;
}

/**
 * An overlay entry as a line: parsed already, its text formatted only when a caller asks
 * for it (a merge's walk reads the entries of the overlay, rarely their text).
 */
class OverlayLine implements RawLine {
  readonly p: string;
  readonly lineNo = 0;
  #line: string | undefined;
  constructor(readonly entry: ManifestEntry) {
    this.p = entry.p;
  }
  get line(): string {
    return (this.#line ??= formatEntry(this.entry));
  }
}

/** The first chunk a ManifestReader reads; each next one is four times larger, up to CHUNK_MAX. */
const CHUNK_FIRST = 64 << 10;
const CHUNK_MAX = 1 << 20;

/**
 * Reads manifest lines in order, synchronously, in chunks of 64 KiB growing to 1 MiB (a
 * reader that stops early, as the /etc merge's past etc/, decodes and splits only the
 * start of a large manifest; a whole read reads in 1 MiB chunks); each line checked against
 * the schema. The manifest's overlay, when it has one (see manifest-overlay.ts), is merged
 * in: the reader yields the manifest as the overlay patches it.
 */
export class ManifestReader {
  private fd: number | null;
  private buf = Buffer.allocUnsafe(CHUNK_FIRST);
  // Bytes after the last newline of a chunk: a line, or a UTF-8 character, can straddle
  // two chunks, so only whole lines are decoded.
  private rest: Buffer = Buffer.alloc(0);
  private lines: string[] = [];
  private idx = 0;
  private eof = false;
  private lineNo = 0;
  private peeked: RawLine | null | undefined = undefined;
  private pos: number;
  /** Chunks read so far (the first is the smallest). */
  private reads = 0;
  private readonly overlay: OverlayView | null;
  /** The overlay's next entry, and the next line of the base (undefined: not read yet). */
  private k = 0;
  private base: RawLine | null | undefined = undefined;

  /**
   * `start`: the byte offset of a line to start at (a part of a manifest, see
   * copy-split.ts; the overlay's entries before it come first, to be passed over by seek).
   */
  constructor(readonly file: string, start = 0) {
    this.pos = start;
    try {
      this.fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    } catch (err) {
      throw new StagedrootError('STATE_CORRUPT', `Cannot open manifest ${file}: ${(err as Error).message}`, { path: file, cause: err });
    }
    try {
      this.overlay = overlayViewOf(file);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** The next entry without consuming it. */
  peek(): ManifestEntry | null {
    const r = this.peekRaw();
    return r === null ? null : this.entryOf(r);
  }

  next(): ManifestEntry | null {
    const r = this.nextRaw();
    return r === null ? null : this.entryOf(r);
  }

  /** The next line, unparsed, without consuming it. */
  peekRaw(): RawLine | null {
    if (this.peeked === undefined) this.peeked = this.read();
    return this.peeked;
  }

  nextRaw(): RawLine | null {
    const r = this.peekRaw();
    this.peeked = undefined;
    return r;
  }

  /** A line's entry, parsed and checked (once). */
  entryOf(r: RawLine): ManifestEntry {
    return (r.entry ??= this.parse(r.line, r.lineNo));
  }

  /** Advances to `p` and returns its entry, or null when the manifest has none (entries before it are skipped). */
  seek(p: string): ManifestEntry | null {
    const r = this.seekRaw(p);
    return r === null ? null : this.entryOf(r);
  }

  /**
   * Like seek, but the matching line is returned unparsed: the caller reuses it whole
   * (see isFileLineFor) or parses it with entryOf. Lines passed over are checked as
   * seek checks them.
   */
  seekRaw(p: string): RawLine | null {
    for (;;) {
      const r = this.peekRaw();
      if (r === null) return null;
      const c = comparePaths(r.p, p);
      if (c === 0) return this.nextRaw();
      this.entryOf(r);
      if (c > 0) return null;
      this.nextRaw();
    }
  }

  /** The next line of the manifest as its overlay patches it. */
  private read(): RawLine | null {
    const ov = this.overlay;
    if (ov === null) return this.readBase();
    for (;;) {
      if (this.base === undefined) this.base = this.readBase();
      const b = this.base;
      const f = this.k < ov.entries.length ? ov.entries[this.k]! : null;
      if (f !== null && (b === null || comparePaths(f.p, b.p) <= 0)) {
        this.k += 1;
        return new OverlayLine(f);
      }
      if (b === null) return null;
      this.base = undefined;
      if (!ov.drops(b.p)) return b;
    }
  }

  private readBase(): RawLine | null {
    for (;;) {
      if (this.idx < this.lines.length) {
        const line = this.lines[this.idx++]!;
        this.lineNo += 1;
        if (line === '') continue;
        return this.raw(line);
      }
      if (this.eof || this.fd === null) {
        if (this.rest.length > 0) {
          const line = this.rest.toString('utf8');
          this.rest = Buffer.alloc(0);
          this.lineNo += 1;
          return this.raw(line);
        }
        this.close();
        return null;
      }
      // The partial line left from the last chunk goes first, the new bytes after it.
      const keep = this.rest.length;
      if (keep === this.buf.length) this.buf = Buffer.concat([this.buf, Buffer.allocUnsafe(this.buf.length)]);
      else if (this.reads++ > 0 && this.buf.length < CHUNK_MAX) this.buf = Buffer.allocUnsafe(Math.min(CHUNK_MAX, this.buf.length * 4));
      this.rest.copy(this.buf, 0);
      const n = fs.readSync(this.fd, this.buf, keep, this.buf.length - keep, this.pos);
      this.pos += n;
      if (n === 0) {
        this.eof = true;
        continue;
      }
      const total = keep + n;
      const end = total === 0 ? -1 : this.buf.lastIndexOf(0x0a, total - 1);
      // Copied: `buf` is overwritten by the next read.
      this.rest = Buffer.from(this.buf.subarray(end + 1, total));
      this.lines = end === -1 ? [] : decode(this.buf.subarray(0, end)).split('\n');
      this.idx = 0;
    }
  }

  private raw(line: string): RawLine {
    const p = cheapPath(line);
    if (p !== null) return { p, line, lineNo: this.lineNo };
    const entry = this.parse(line, this.lineNo);
    return { p: entry.p, line, lineNo: this.lineNo, entry };
  }

  private parse(line: string, lineNo: number): ManifestEntry {
    return parseManifestLine(line, this.file, `line ${lineNo}`);
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
