import * as fs from 'node:fs';
import { StagedrootError } from '../errors.js';
import { cheapPath, parseManifestLine, type ManifestEntry } from './manifest.js';
import { comparePaths } from './paths.js';

const WINDOW = 4096;
const MAX_CACHED = 256;
// Bisection goes on inside a cached window (no I/O) until a few lines are left.
const SCAN = 1024;

/**
 * Finds the entries of a few paths in a manifest by binary search over its bytes (a
 * manifest is sorted by comparePaths): O(k log n) small reads instead of reading it
 * whole, so that finalize, which checks an update's delta, costs the same for 10,000
 * or 1,000,000 entries. Paths absent from the manifest are absent from the result.
 */
export function lookupEntries(file: string, paths: Iterable<string>): Map<string, ManifestEntry> {
  const found = new Map<string, ManifestEntry>();
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (err) {
    throw new StagedrootError('STATE_CORRUPT', `Cannot open manifest ${file}: ${(err as Error).message}`, { path: file, cause: err });
  }
  try {
    const size = fs.fstatSync(fd).size;
    const reader = new LineReader(fd, size);
    // Every search starts from the whole file: the first probes are then the same for
    // every path and come from the window cache.
    for (const target of [...new Set(paths)].sort(comparePaths)) {
      // Invariant: every line starting before `lo` sorts before the target, and every
      // line starting at or after `hi` sorts at or after it.
      let lo = 0;
      let hi = size;
      while (hi - lo > SCAN) {
        const mid = lo + Math.floor((hi - lo) / 2);
        const start = reader.lineStartFrom(mid);
        if (start >= hi) {
          hi = mid; // no line starts in [mid, hi)
          continue;
        }
        const line = reader.pathAt(start, file);
        if (comparePaths(line.p, target) < 0) lo = line.next;
        else hi = start;
      }
      let pos = lo;
      while (pos < size) {
        const line = reader.pathAt(pos, file);
        const c = comparePaths(line.p, target);
        if (c === 0) found.set(target, parseManifestLine(reader.text(pos, line.next - 1), file, `at byte ${pos}`));
        if (c >= 0) break;
        pos = line.next;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return found;
}

/**
 * Positional reads of whole lines through 4 KiB windows, cached by offset in one arena
 * (the first bisection steps probe the same offsets for every path).
 */
class LineReader {
  private arena = Buffer.allocUnsafe(MAX_CACHED * WINDOW);
  private slots = new Map<number, number>(); // window offset -> arena slot
  private owners: number[] = []; // arena slot -> window offset
  private nextSlot = 0;
  private buf: Buffer = Buffer.alloc(0);
  private bufStart = 0;

  constructor(
    private readonly fd: number,
    private readonly size: number,
  ) {}

  /** Makes `buf` a window holding `pos` (pos < size). */
  private load(pos: number): void {
    if (pos >= this.bufStart && pos < this.bufStart + this.buf.length) return;
    const len = Math.min(WINDOW, this.size - pos);
    let slot = this.slots.get(pos);
    if (slot === undefined) {
      slot = this.nextSlot;
      this.nextSlot = (this.nextSlot + 1) % MAX_CACHED;
      const old = this.owners[slot];
      if (old !== undefined) this.slots.delete(old);
      this.owners[slot] = pos;
      for (let off = 0; off < len; ) {
        const n = fs.readSync(this.fd, this.arena, slot * WINDOW + off, len - off, pos + off);
        if (n === 0) throw new StagedrootError('IO', 'The manifest shrank while it was being read', {});
        off += n;
      }
      this.slots.set(pos, slot);
    }
    this.buf = this.arena.subarray(slot * WINDOW, slot * WINDOW + len);
    this.bufStart = pos;
  }

  /** Offset of the first newline at or after `pos`, or the file size. */
  private newlineFrom(pos: number): number {
    while (pos < this.size) {
      this.load(pos);
      const i = this.buf.indexOf(0x0a, pos - this.bufStart);
      if (i !== -1) return this.bufStart + i;
      pos = this.bufStart + this.buf.length;
    }
    return this.size;
  }

  /** The first line start at or after `pos` (or the file size). */
  lineStartFrom(pos: number): number {
    if (pos === 0) return 0;
    const nl = this.newlineFrom(pos - 1);
    return nl >= this.size ? this.size : nl + 1;
  }

  /** The text of [start, end). */
  text(start: number, end: number): string {
    this.load(start);
    if (end <= this.bufStart + this.buf.length) return this.buf.toString('utf8', start - this.bufStart, end - this.bufStart);
    // A line longer than what is left of the window.
    const bytes = Buffer.allocUnsafe(end - start);
    for (let off = 0; off < bytes.length; ) off += fs.readSync(this.fd, bytes, off, bytes.length - off, start + off);
    return bytes.toString('utf8');
  }

  /** The path of the line starting at `start`, and where the next line starts. */
  pathAt(start: number, file: string): { p: string; next: number } {
    const end = this.newlineFrom(start);
    const text = this.text(start, end);
    // An empty line sorts first and matches nothing (the reader skips those too).
    const p = text === '' ? '' : (cheapPath(text) ?? parseManifestLine(text, file, `at byte ${start}`).p);
    return { p, next: end + 1 };
  }
}
