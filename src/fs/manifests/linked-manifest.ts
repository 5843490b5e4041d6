import * as fs from 'node:fs';
import type { FaultHook } from '../core/faults.js';
import { ioError } from '../core/io-error.js';
import { writeNewFile } from '../core/new-entry.js';
import type { ManifestWriter } from './manifest.js';
import type { ManifestCursor } from './manifest-cursor.js';
import { parseManifestLine, type ManifestEntry } from './manifest-line.js';
import { composeOverlay, formatOverlay, overlayDigest, overlayFile, type ManifestOverlay } from './manifest-overlay.js';

/**
 * A stage's manifest as a link to its base's manifest file plus an overlay of what
 * differs (see manifest-overlay.ts), instead of a copy of every line: the base file is
 * never written after it is written, so two deployments may share it (one link(2)). The
 * overlay is relative to the base FILE: the base's own overlay (its finalize's merge)
 * composed with what the stage changed. Nothing writes a manifest in place (ManifestWriter
 * refuses a file with a second link); prune removes one name of it.
 */

/**
 * How many paths (dirty and removed) an overlay may name before the manifest is written
 * whole instead: an eighth of the base's lines, at least 1,024 and at most 65,536. Every
 * reader holds the overlay whole and parses its lines (a base line is passed over as
 * bytes), so an eighth keeps a reader within a small factor of the plain manifest's cost;
 * overlays accumulate from stage to stage (each composes its base's), so a rewrite comes
 * once per an eighth of the tree changed: O(change) per stage, amortized. The floor keeps
 * small trees on the overlay (1,024 lines parse in a few milliseconds), the cap bounds
 * the memory a reader holds (about 30 MB) on a huge tree.
 */
export function overlayBound(baseEntries: number): number {
  return Math.max(1024, Math.min(65_536, Math.floor(baseEntries / 8)));
}

/** Where a manifest pass puts its lines: in order, each with the base's line at its path. */
export interface ManifestSink {
  /** A line of the new manifest; `was`: the base's line at `p` (null: none), `e` its entry when at hand. */
  put(p: string, line: string, was: string | null, e?: ManifestEntry): void;
  /** The base's line at `p` is not in the new manifest. */
  gone(p: string): void;
  /**
   * The base's lines from the cursor's next one, under `prefix` and before `stop`,
   * unchanged: whether the cursor moved, and the sizes the run's lines record (0 when the
   * cursor skipped the run uncounted: see `uncounted`).
   */
  run(prev: ManifestCursor, prefix: string, stop: string | null): { moved: boolean; bytes: number };
  /** Lines of the base that runs passed over uncounted (ManifestCursor.skipRun), counted at the end of the pass. */
  uncounted(lines: number): void;
  readonly count: number;
}

/** Every line written (the manifest whole). */
export class WholeSink implements ManifestSink {
  constructor(private readonly out: ManifestWriter) {}
  get count(): number {
    return this.out.count;
  }
  put(p: string, line: string): void {
    this.out.writeLine(p, line);
  }
  gone(): void {}
  run(prev: ManifestCursor, prefix: string, stop: string | null): { moved: boolean; bytes: number } {
    const r = prev.copyRun(this.out, prefix, stop);
    return { moved: r.lines > 0, bytes: r.bytes };
  }
  uncounted(): void {
    throw new Error('a whole manifest copies every run');
  }
}

/** Thrown by OverlaySink past its bound: the pass is redone whole. */
export class OverlayTooBig extends Error {}

/** Only what differs from the base, as an overlay of the base's view (see composeLinked). */
export class OverlaySink implements ManifestSink {
  count = 0;
  readonly dirty = new Set<string>();
  readonly entries: ManifestEntry[] = [];

  /** `bound`: the most dirty paths before OverlayTooBig. */
  constructor(
    private readonly file: string,
    private readonly bound: number,
  ) {}

  put(p: string, line: string, was: string | null, e?: ManifestEntry): void {
    this.count += 1;
    if (was === line) return;
    this.entries.push(e ?? parseManifestLine(line, this.file, p));
    this.mark(p);
  }

  gone(p: string): void {
    this.mark(p);
  }

  run(prev: ManifestCursor, prefix: string, stop: string | null): { moved: boolean; bytes: number } {
    // With the base file's totals the run is passed over uncounted (its lines are added by `uncounted`).
    if (prev.canSkip) return { moved: prev.skipRun(prefix, stop), bytes: 0 };
    const r = prev.passRun(prefix, stop);
    this.count += r.lines;
    return { moved: r.lines > 0, bytes: r.bytes };
  }

  uncounted(lines: number): void {
    this.count += lines;
  }

  private mark(p: string): void {
    this.dirty.add(p);
    if (this.dirty.size > this.bound) throw new OverlayTooBig();
  }
}

/**
 * The overlay of the new manifest relative to the base FILE: the base's own overlay `had`
 * composed with what the pass found different from the base's view. Null when it names
 * more paths than `bound` (write the manifest whole).
 */
export function composeLinked(baseFileSha256: string, had: ManifestOverlay | null, sink: OverlaySink, bound: number): { text: string; digest: string } | null {
  const o = composeOverlay(had, { dirty: sink.dirty, removed: new Set(), entries: sink.entries });
  if (o.dirty.size + o.removed.size > bound) return null;
  const text = formatOverlay(baseFileSha256, o.dirty, o.removed, o.entries);
  return { text, digest: overlayDigest(baseFileSha256, text) };
}

/** Errors of link(2) that mean "not here" (another filesystem, too many links, not allowed): write the manifest whole. */
const NO_LINK = new Set(['EXDEV', 'EMLINK', 'EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Links the base manifest file at `out` and writes the overlay beside it (not yet
 * fsynced: the stage's sync step fsyncs both and their directory before it commits).
 * False when the filesystem will not link it (the caller writes the manifest whole).
 */
export function linkWithOverlay(base: string, out: string, text: string, faults: FaultHook): boolean {
  try {
    fs.linkSync(base, out);
  } catch (err) {
    if (NO_LINK.has((err as NodeJS.ErrnoException).code ?? '')) return false;
    throw ioError(err, out, out, 'sysroot');
  }
  faults.afterMutation('link', out);
  const file = overlayFile(out);
  const data = Buffer.from(text, 'utf8');
  writeNewFile(file, data, faults);
  return true;
}
