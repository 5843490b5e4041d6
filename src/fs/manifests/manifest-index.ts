import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { cheapPath, parseManifestLine, type ManifestEntry } from './manifest-line.js';
import { comparePaths } from '../core/paths.js';
import type { OverlayView } from './manifest-overlay.js';
import { overlayLookupOf, type OverlayLookup } from './overlay-lookup.js';

const BLOCK = 1 << 16;
/** Below this many bytes a search reads the lines one by one. */
const SCAN = 4096;
/** Blocks kept (4 MiB): the top of every search, and the neighbourhood of a sorted run of lookups. */
const MAX_BLOCKS = 64;

/**
 * Looks entries up in a manifest by path without reading it whole: a binary search over
 * byte offsets (a manifest is sorted by comparePaths, one line an entry), reading 64 KiB
 * blocks that are kept for the next lookup. A lookup costs O(log size) block reads at
 * worst; a sorted run of lookups in one directory mostly hits blocks read already. The
 * manifest's overlay (see manifest-overlay.ts) is looked at first, its lines parsed as
 * they are looked up (overlay-lookup.ts).
 */
export class ManifestIndex {
  private fd: number | null;
  private readonly size: number;
  private readonly blocks = new Map<number, Buffer>();
  private readonly overlay: OverlayLookup | null;

  constructor(readonly file: string) {
    try {
      this.fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      this.size = fs.fstatSync(this.fd).size;
    } catch (err) {
      throw new StagedrootError('STATE_CORRUPT', `Cannot open manifest ${file}: ${(err as Error).message}`, { path: file, cause: err });
    }
    try {
      this.overlay = overlayLookupOf(file);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** The entry of `p`, or null when the manifest has none. */
  find(p: string): ManifestEntry | null {
    if (this.overlay !== null) {
      const e = this.overlay.find(p);
      if (e !== undefined) return e;
      if (this.overlay.drops(p)) return null;
    }
    return this.findBase(p);
  }

  private findBase(p: string): ManifestEntry | null {
    // lo: a line start at or before p's line (0 at first); hi: a line start after it (or the end).
    let lo = 0;
    let hi = this.size;
    while (hi - lo > SCAN) {
      const s = this.lineStartFrom((lo + hi) >>> 1);
      if (s >= hi) break; // one long line spans the middle: scan
      const { line } = this.lineAt(s);
      if (line === '') break;
      const c = comparePaths(this.pathOf(line, s), p);
      if (c === 0) return this.parse(line, s);
      if (c < 0) lo = s;
      else hi = s;
    }
    for (let s = lo; s < hi; ) {
      const { line, end } = this.lineAt(s);
      if (line !== '') {
        const c = comparePaths(this.pathOf(line, s), p);
        if (c === 0) return this.parse(line, s);
        if (c > 0) return null;
      }
      s = end;
    }
    return null;
  }

  /** The manifest's overlay for lookups, its lines parsed as they are looked up (null: none). */
  get overlayLookup(): OverlayLookup | null {
    return this.overlay;
  }

  /** The manifest's overlay as lookups apply it (null: none). */
  get overlayView(): OverlayView | null {
    return this.overlay?.view() ?? null;
  }

  /** The size of the base file in bytes. */
  get byteSize(): number {
    return this.size;
  }

  /**
   * The byte offset of the first line of the base file (the overlay is not looked at)
   * whose path `after` holds, for a predicate that is false and then true in manifest
   * order (the file's size when it holds for none): a binary search, O(log size) block reads.
   */
  firstLineWhere(after: (p: string) => boolean): number {
    let lo = 0; // a line start whose line is before the first that holds (or 0)
    let hi = this.size; // a line start whose line holds (or the size)
    while (hi - lo > SCAN) {
      const s = this.lineStartFrom((lo + hi) >>> 1);
      if (s >= hi) break;
      const { line } = this.lineAt(s);
      if (line === '') break;
      if (after(this.pathOf(line, s))) hi = s;
      else if (s === lo) break;
      else lo = s;
    }
    for (let s = lo; s < hi; ) {
      const { line, end } = this.lineAt(s);
      if (line !== '' && after(this.pathOf(line, s))) return s;
      s = end;
    }
    return hi;
  }

  /** The lines of the base file that start in [from, to) (line starts, as firstLineWhere returns), parsed, in order. */
  *entriesBetween(from: number, to: number): Generator<ManifestEntry> {
    for (let s = this.lineStartFrom(from); s < to; ) {
      const { line, end } = this.lineAt(s);
      if (line !== '') yield this.parse(line, s);
      s = end;
    }
  }

  close(): void {
    if (this.fd !== null) {
      fs.closeSync(this.fd);
      this.fd = null;
    }
    this.blocks.clear();
  }

  private block(i: number): Buffer {
    let b = this.blocks.get(i);
    if (b === undefined) {
      if (this.fd === null) throw new StagedrootError('IO', `Manifest ${this.file} was closed`, { path: this.file });
      const len = Math.min(BLOCK, this.size - i * BLOCK);
      b = Buffer.allocUnsafe(len);
      for (let off = 0; off < len; ) {
        const n = fs.readSync(this.fd, b, off, len - off, i * BLOCK + off);
        if (n === 0) throw new StagedrootError('STATE_CORRUPT', `Manifest ${this.file} changed while it was read`, { path: this.file });
        off += n;
      }
      if (this.blocks.size >= MAX_BLOCKS) this.blocks.delete(this.blocks.keys().next().value!);
      this.blocks.set(i, b);
    }
    return b;
  }

  /** The offset of the first newline at or after `off`, or the size. */
  private newlineFrom(off: number): number {
    for (let i = Math.floor(off / BLOCK); i * BLOCK < this.size; i++) {
      const b = this.block(i);
      const at = b.indexOf(0x0a, Math.max(0, off - i * BLOCK));
      if (at !== -1) return i * BLOCK + at;
    }
    return this.size;
  }

  /** The first line start at or after `off`. */
  private lineStartFrom(off: number): number {
    return off === 0 ? 0 : Math.min(this.size, this.newlineFrom(off - 1) + 1);
  }

  /** The line that starts at `s` (without its newline) and the start of the next one. */
  private lineAt(s: number): { line: string; end: number } {
    const nl = this.newlineFrom(s);
    const parts: Buffer[] = [];
    for (let off = s; off < nl; ) {
      const i = Math.floor(off / BLOCK);
      const b = this.block(i);
      const to = Math.min(nl, (i + 1) * BLOCK);
      parts.push(b.subarray(off - i * BLOCK, to - i * BLOCK));
      off = to;
    }
    const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    return { line: bytes.toString('utf8'), end: Math.min(this.size, nl + 1) };
  }

  private pathOf(line: string, at: number): string {
    return cheapPath(line) ?? this.parse(line, at).p;
  }

  private parse(line: string, at: number): ManifestEntry {
    return parseManifestLine(line, this.file, `the line at byte ${at}`);
  }
}
