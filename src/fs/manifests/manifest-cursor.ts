import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { decode, type ManifestWriter, type RawLine } from './manifest.js';
import { LINE_HEAD, asciiPathEnd, cheapPath, formatEntry, lineSize, parseManifestLine, sumSizes, type ManifestEntry } from './manifest-line.js';
import type { ManifestTotals } from './manifest-summary.js';
import { comparePaths, isUnder } from '../core/paths.js';
import { OverlayView, overlayViewOf, type ManifestOverlay } from './manifest-overlay.js';

const NL = 0x0a;
const SLASH = 0x2f;
const CHUNK = 1 << 20;

/**
 * Reads a manifest line by line like ManifestReader, over the file's bytes rather than
 * decoded lines, so that a run of lines that is copied unchanged into a new manifest
 * (a snapshot's usr/, 97% of a tree) goes through as bytes: no string per line, no
 * parse, no re-encoding. A line is decoded only when the caller looks at it. The
 * manifest's overlay (see manifest-overlay.ts) is merged in as ManifestReader merges it:
 * a run copied as bytes stops before the next path the overlay names.
 */
export class ManifestCursor {
  private fd: number | null;
  private buf: Buffer;
  /** buf[start, end) holds bytes not consumed yet; `pos` is the file offset after them. */
  private start = 0;
  private end = 0;
  private pos = 0;
  private eof = false;
  private lineNo = 0;
  private peeked: { raw: RawLine; next: number } | null | undefined = undefined;
  private readonly overlay: OverlayView | null;
  /** The overlay's next entry; `fresh`: the line peekRaw returned is that entry. */
  private k = 0;
  private fresh: RawLine | null = null;
  /** The base file's non-empty lines consumed so far and the sizes they record (skipped runs aside). */
  private seenLines = 0;
  private seenBytes = 0;
  /** A run was passed over by skipRun (uncounted): the file's totals are then the summary's. */
  private skippedRuns = false;

  /**
   * `chunk`: the bytes read at a time (tests make it small to cross chunk edges often).
   * `overlay`: the file's overlay when the caller has read it already (null: it has none).
   */
  constructor(
    readonly file: string,
    chunk = CHUNK,
    overlay?: ManifestOverlay | null,
    /**
     * The base file's totals (its summary, see manifest-summary.ts), which the caller has
     * checked against the file: with them skipRun passes over a run without counting it.
     */
    private readonly totals?: ManifestTotals,
  ) {
    this.buf = Buffer.allocUnsafe(chunk);
    try {
      this.fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    } catch (err) {
      throw new StagedrootError('STATE_CORRUPT', `Cannot open manifest ${file}: ${(err as Error).message}`, { path: file, cause: err });
    }
    try {
      this.overlay = overlay === undefined ? overlayViewOf(file) : overlay === null ? null : new OverlayView(overlay);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** The next line (of the manifest as its overlay patches it), unparsed, without consuming it. */
  peekRaw(): RawLine | null {
    const ov = this.overlay;
    if (ov === null) return this.basePeek();
    if (this.fresh !== null) return this.fresh;
    for (;;) {
      const b = this.basePeek();
      const f = this.k < ov.entries.length ? ov.entries[this.k]! : null;
      if (f !== null && (b === null || comparePaths(f.p, b.p) <= 0)) {
        this.fresh = { p: f.p, line: formatEntry(f), lineNo: 0, entry: f };
        return this.fresh;
      }
      if (b === null || !ov.drops(b.p)) return b;
      this.baseNext();
    }
  }

  nextRaw(): RawLine | null {
    const r = this.peekRaw();
    if (this.fresh !== null) {
      this.fresh = null;
      this.k += 1;
      return r;
    }
    return this.baseNext();
  }

  private basePeek(): RawLine | null {
    if (this.peeked === undefined) this.peeked = this.readLine();
    return this.peeked === null ? null : this.peeked.raw;
  }

  private baseNext(): RawLine | null {
    const r = this.basePeek();
    if (this.peeked) {
      this.start = this.peeked.next;
      this.seenLines += 1;
      this.seenBytes += lineSize(this.peeked.raw.line);
    }
    this.peeked = undefined;
    return r;
  }

  /** True when skipRun may be used (the caller gave the file's totals). */
  get canSkip(): boolean {
    return this.totals !== undefined;
  }

  /**
   * Passes over the run passRun would pass over, without counting its lines or summing
   * their sizes (a binary search over the buffer's bytes, not a look at each line): the
   * runs' totals are then what the file's totals leave (uncountedTotals). Only with the
   * file's totals (canSkip). Returns whether it moved.
   */
  skipRun(prefix: string, stop: string | null): boolean {
    if (this.totals === undefined) throw new Error('ManifestCursor.skipRun needs the file\'s totals');
    const moved = this.run(prefix, stop, null, true).lines > 0;
    if (moved) this.skippedRuns = true;
    return moved;
  }

  /**
   * Once the cursor has read the whole file: the lines (and sizes) of the base file that
   * skipRun passed over, from the file's totals; null when none was skipped. A summary
   * that cannot be this file's (fewer lines than were read) is STATE_CORRUPT.
   */
  uncountedTotals(): ManifestTotals | null {
    if (!this.skippedRuns) return null;
    const t = this.totals!;
    const lines = t.lines - this.seenLines;
    const bytes = t.bytes - this.seenBytes;
    if (!this.eof || lines < 0 || bytes < 0) throw new StagedrootError('STATE_CORRUPT', `The summary of manifest ${this.file} does not match it`, { path: this.file });
    return { lines, bytes };
  }

  /** Once the cursor has read the whole file: its totals (counted, or the summary's when runs were skipped). */
  fileTotals(): ManifestTotals | null {
    if (!this.eof) return null;
    return this.skippedRuns ? this.totals! : { lines: this.seenLines, bytes: this.seenBytes };
  }

  /** A line's entry, parsed and checked (once). */
  entryOf(r: RawLine): ManifestEntry {
    return (r.entry ??= parseManifestLine(r.line, this.file, r.lineNo > 0 ? `line ${r.lineNo}` : 'a line'));
  }

  /**
   * Copies, byte for byte, the lines from the next one on whose path is strictly below
   * `prefix` and sorts before `stop` (null: no bound): a sorted manifest holds them as
   * one run. The caller has checked that the next line is one. Returns how many lines
   * were copied and the sum of their files' sizes.
   */
  copyRun(out: ManifestWriter, prefix: string, stop: string | null): { lines: number; bytes: number } {
    return this.run(prefix, stop, out);
  }

  /** Passes over the run copyRun would copy (its lines neither decoded nor copied) and sums its files' sizes as copyRun does. */
  passRun(prefix: string, stop: string | null): { lines: number; bytes: number } {
    return this.run(prefix, stop, null);
  }

  /** `skip`: the run's lines are neither counted nor summed (lines is 1 when it moved, 0 when not). */
  private run(prefix: string, until: string | null, out: ManifestWriter | null, skip = false): { lines: number; bytes: number } {
    let stop = until;
    if (this.overlay !== null) {
      // The run stops before the next path the overlay names: from there on, line by line.
      const next = this.peekRaw();
      if (next === null || this.fresh !== null) return { lines: 0, bytes: 0 };
      const point = this.overlay.nextPointAfter(next.p);
      if (point !== null && (stop === null || comparePaths(point, stop) < 0)) stop = point;
    }
    if (this.peeked) this.lineNo -= 1; // counted again below
    this.peeked = undefined; // `start` still points at the peeked line
    const under = Buffer.from(`${prefix}/`);
    const stopBytes = stop !== null && /^[\x20-\x7e]*$/.test(stop) && !stop.includes('\\') ? Buffer.from(stop, 'latin1') : null;
    const passes = (at: number, lineEnd: number): boolean => {
      const end = asciiPathEnd(this.buf, at, lineEnd);
      if (end !== -1 && (stop === null || stopBytes !== null)) {
        const from = at + LINE_HEAD.length;
        return end - from > under.length && this.buf.compare(under, 0, under.length, from, from + under.length) === 0 && (stopBytes === null || compareBytes(this.buf, from, end, stopBytes) < 0);
      }
      const p = this.pathAt(at, lineEnd);
      return p !== prefix && isUnder(p, prefix) && (stop === null || comparePaths(p, stop) < 0);
    };
    let lines = 0;
    let bytes = 0;
    if (skip) {
      for (;;) {
        const firstEnd = this.wholeLine();
        if (firstEnd === -1) break;
        if (firstEnd === this.start) {
          this.start += 1; // an empty line, as the reader skips it
          continue;
        }
        if (!passes(this.start, firstEnd)) break;
        lines = 1;
        // The buffer's last whole line: when it passes, so does every line before it (sorted).
        const tailEnd = this.eof && this.buf[this.end - 1] !== NL ? this.end : this.buf.lastIndexOf(NL, this.end - 1);
        const lastStart = tailEnd <= firstEnd ? this.start : this.buf.lastIndexOf(NL, tailEnd - 1) + 1;
        if (lastStart < tailEnd && passes(lastStart, tailEnd)) {
          this.start = Math.min(tailEnd + 1, this.end);
          continue;
        }
        // Else a binary search over the bytes between: lo a line start that passes, hi one that does not (or an empty line).
        let lo = this.start;
        let hi = lastStart;
        while (hi - lo > 256) {
          const mid = this.buf.indexOf(NL, (lo + hi) >> 1) + 1;
          if (mid <= lo || mid >= hi) break;
          const end = this.buf.indexOf(NL, mid);
          if (end === mid || !passes(mid, end)) hi = mid;
          else lo = mid;
        }
        for (;;) {
          const end = this.buf.indexOf(NL, lo);
          if (end === -1 || end >= this.end || end === lo || !passes(lo, end)) break;
          lo = end + 1;
        }
        this.start = lo;
        if (this.buf[lo] === NL && lo < this.end) continue; // an empty line: the run may go on after it
        break;
      }
      return { lines, bytes };
    }
    // How many of the buffer's lines to look at, doubled while the run goes on: a short run
    // (before an overlay point, which can come every few lines) costs its own lines, not a
    // scan of the whole buffer (O(points × buffer) per pass with a large overlay).
    let limit = 64;
    for (;;) {
      const firstEnd = this.wholeLine();
      if (firstEnd === -1) break;
      if (firstEnd === this.start) {
        // An empty line is skipped, as the reader skips it.
        this.start += 1;
        this.lineNo += 1;
        continue;
      }
      // The whole lines in the buffer from here, at most `limit` (up to an empty one, handled next round).
      const starts = [this.start];
      const ends = [firstEnd];
      for (let at = firstEnd + 1; at < this.end && starts.length < limit; ) {
        const nl = this.buf.indexOf(NL, at);
        if (nl === -1 || nl >= this.end) {
          if (this.eof) {
            starts.push(at);
            ends.push(this.end);
          }
          break;
        }
        if (nl === at) break;
        starts.push(at);
        ends.push(nl);
        at = nl + 1;
      }
      // The manifest is sorted, so the lines that pass come first: a binary search finds
      // how many, with a look at O(log n) lines of the buffer rather than at each.
      const last = starts.length - 1;
      let k = 0;
      if (passes(starts[last]!, ends[last]!)) {
        k = starts.length;
      } else if (passes(starts[0]!, ends[0]!)) {
        let lo = 0; // passes
        let hi = last; // does not
        while (hi - lo > 1) {
          const mid = (lo + hi) >> 1;
          if (passes(starts[mid]!, ends[mid]!)) lo = mid;
          else hi = mid;
        }
        k = hi;
      }
      if (k === 0) break; // the next line is not in the run
      const lastEnd = ends[k - 1]!;
      const next = Math.min(lastEnd + 1, this.end);
      const sum = sumSizes(this.buf, this.start, lastEnd);
      bytes += sum;
      this.seenLines += k;
      this.seenBytes += sum;
      if (out !== null) {
        const run = this.buf.subarray(this.start, next);
        // A last line without its newline gets one, as the writer would write it.
        out.writeRaw(lastEnd === this.end ? Buffer.concat([run, Buffer.from('\n')]) : run, k, this.pathAt(this.start, firstEnd), this.pathAt(starts[k - 1]!, lastEnd));
      }
      this.lineNo += k;
      lines += k;
      this.start = next;
      if (k < starts.length) break; // the run ended inside this buffer
      limit *= 2;
    }
    return { lines, bytes };
  }

  close(): void {
    if (this.fd !== null) {
      fs.closeSync(this.fd);
      this.fd = null;
    }
  }

  /**
   * The end of the line at `start` (its newline, or the end of the file for a last line
   * without one), reading more as needed; -1 at the end of the file.
   */
  private wholeLine(): number {
    for (;;) {
      const nl = this.buf.indexOf(NL, this.start);
      if (nl !== -1 && nl < this.end) return nl;
      if (this.eof || this.fd === null) return this.start < this.end ? this.end : -1;
      this.refill();
    }
  }

  /** Moves the unconsumed bytes to the front (a bigger buffer for a line longer than it) and reads more. */
  private refill(): void {
    const keep = this.end - this.start;
    if (keep === this.buf.length) {
      const bigger = Buffer.allocUnsafe(this.buf.length * 2);
      this.buf.copy(bigger, 0, this.start, this.end);
      this.buf = bigger;
    } else if (keep > 0) {
      this.buf.copy(this.buf, 0, this.start, this.end);
    }
    this.start = 0;
    this.end = keep;
    const n = fs.readSync(this.fd!, this.buf, this.end, this.buf.length - this.end, this.pos);
    this.pos += n;
    this.end += n;
    if (n === 0) this.eof = true;
  }

  private readLine(): { raw: RawLine; next: number } | null {
    for (;;) {
      const nl = this.wholeLine();
      if (nl === -1) {
        this.close();
        return null;
      }
      this.lineNo += 1;
      const next = Math.min(nl + 1, this.end);
      if (nl === this.start) {
        this.start = next;
        continue;
      }
      const line = decode(this.buf.subarray(this.start, nl));
      const p = cheapPath(line);
      // After a skipped run the line numbers are unknown: 0, and an error names the byte offset.
      const lineNo = this.skippedRuns ? 0 : this.lineNo;
      if (p !== null) return { raw: { p, line, lineNo }, next };
      const entry = parseManifestLine(line, this.file, this.where(this.start, this.lineNo));
      return { raw: { p: entry.p, line, lineNo, entry }, next };
    }
  }

  /** The path of the line at `at`, decoded (the line parsed when it has another shape). */
  private pathAt(at: number, lineEnd: number): string {
    const end = asciiPathEnd(this.buf, at, lineEnd);
    if (end !== -1) return this.buf.toString('latin1', at + LINE_HEAD.length, end);
    const line = decode(this.buf.subarray(at, lineEnd));
    return cheapPath(line) ?? parseManifestLine(line, this.file, this.where(at, this.lineNo + 1, 'near ')).p;
  }

  /** Where the line at buf[at] is, for an error: its number, or its byte offset once a run was skipped uncounted. */
  private where(at: number, lineNo: number, near = ''): string {
    return this.skippedRuns ? `the line at byte ${this.pos - (this.end - at)}` : `${near}line ${lineNo}`;
  }
}

/** comparePaths over ASCII bytes: at the first difference "/" sorts first; a prefix sorts before. */
function compareBytes(b: Buffer, from: number, to: number, other: Buffer): number {
  const n = Math.min(to - from, other.length);
  for (let i = 0; i < n; i++) {
    const x = b[from + i]!;
    const y = other[i]!;
    if (x !== y) {
      if (x === SLASH) return -1;
      if (y === SLASH) return 1;
      return x < y ? -1 : 1;
    }
  }
  const la = to - from;
  return la === other.length ? 0 : la < other.length ? -1 : 1;
}
