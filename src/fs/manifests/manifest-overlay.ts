import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { StagedrootError } from '../../errors.js';
import { hashFile } from '../core/hash.js';
import { comparePaths, isUnderAny } from '../core/paths.js';
import { formatEntry, parseManifestLine, type ManifestEntry } from './manifest-line.js';
import { TextCache } from './text-cache.js';

/**
 * A manifest's overlay (MANIFEST.overlay beside it): what finalize's /etc merge changed,
 * recorded as a patch of the manifest instead of a rewrite of it, so that finalize costs
 * O(changes in /etc), not O(tree). The base manifest's lines at a `dirty` path, or below a
 * `removed` one, are replaced by the overlay's `entries` (the dirty paths that exist, as
 * the merge left them), merged in order.
 *
 * Every reader of a manifest (ManifestReader, ManifestCursor, ManifestIndex) opens the
 * overlay with it, so no reader sees the base alone; a manifest's digest (manifestDigest)
 * covers both. The overlay is written whole, atomically (the safe-fs layer's write via
 * a temp), before the state transition that records its digest.
 *
 * Format: one header line `{"overlay":1,"base":SHA,"dirty":[...],"removed":[...]}`
 * (`base`: the sha256 of the base manifest it patches, as recorded when it was staged),
 * then the entries, one manifest line each, in manifest order.
 */
export interface ManifestOverlay {
  base: string;
  dirty: ReadonlySet<string>;
  removed: ReadonlySet<string>;
  /** Sorted by comparePaths. */
  entries: readonly ManifestEntry[];
  /** The overlay file's text (what the digest covers). */
  text: string;
}

export function overlayFile(manifest: string): string {
  return `${manifest}.overlay`;
}

/**
 * The last overlay parsed of each file, with its text: a reader that finds the same text
 * again takes the parse (the entries, checked line by line, are what costs: an overlay
 * names every copied file outside the hardlinked prefixes, and one live apply opens the
 * staged manifest's and the booted one's several times). Keyed by the text itself, not
 * by a stat: the file is read every time, only the parse is saved. The parse is never
 * changed by its readers (readonly throughout).
 */
const parsed = new TextCache<ManifestOverlay>(8);

/** The overlay of `manifest`, or null when it has none. */
export function readOverlay(manifest: string): ManifestOverlay | null {
  const text = readOverlayText(manifest);
  return text === null ? null : overlayOfText(manifest, text);
}

/** The text of `manifest`'s overlay, or null when it has none. */
export function readOverlayText(manifest: string): string | null {
  const file = overlayFile(manifest);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StagedrootError('STATE_CORRUPT', `Cannot read manifest overlay ${file}: ${(err as Error).message}`, { path: file, cause: err });
  }
}

/** The parse of `text`, the overlay of `manifest` as read: the one made for the same text already, else a new one (kept, see `parsed`). */
export function overlayOfText(manifest: string, text: string): ManifestOverlay {
  const file = overlayFile(manifest);
  return parsed.get(file, text, (t) => parseOverlay(t, file));
}

/** The parse of `text` made already (by a reader of the whole overlay), or null. */
export function parsedOverlay(manifest: string, text: string): ManifestOverlay | null {
  return parsed.peek(overlayFile(manifest), text) ?? null;
}

export const overlayUnreadable = (file: string, why: string): StagedrootError => new StagedrootError('STATE_CORRUPT', `Manifest overlay ${file} is unreadable: ${why}`, { path: file });
const bad = overlayUnreadable;

/** An overlay's lines (the last one empty) and its header, checked: `base`, the dirty and the removed paths. */
export function overlayHead(text: string, file: string): { lines: string[]; base: string; dirty: Set<string>; removed: Set<string> } {
  const lines = text.split('\n');
  if (lines[lines.length - 1] !== '') throw bad(file, 'it does not end with a newline (torn)');
  let head: unknown;
  try {
    head = JSON.parse(lines[0]!);
  } catch (err) {
    throw bad(file, (err as Error).message);
  }
  const h = head as { overlay?: unknown; base?: unknown; dirty?: unknown; removed?: unknown };
  const strings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
  if (typeof head !== 'object' || head === null || h.overlay !== 1 || typeof h.base !== 'string' || !strings(h.dirty) || !strings(h.removed) || Object.keys(head).length !== 4) {
    throw bad(file, 'its first line is not an overlay header');
  }
  // A set, not the header's array: a stage's overlay on the portable path names all of etc/
  // (thousands of paths), and a lookup per entry in the array made every read quadratic.
  return { lines, base: h.base as string, dirty: new Set(h.dirty), removed: new Set(h.removed) };
}

function parseOverlay(text: string, file: string): ManifestOverlay {
  const { lines, base, dirty, removed } = overlayHead(text, file);
  const entries: ManifestEntry[] = [];
  for (let i = 1; i < lines.length - 1; i++) {
    const e = parseManifestLine(lines[i]!, file, `line ${i + 1}`);
    if (entries.length > 0 && comparePaths(entries[entries.length - 1]!.p, e.p) >= 0) throw bad(file, `line ${i + 1} is out of order`);
    if (!dirty.has(e.p)) throw bad(file, `line ${i + 1} (${e.p}) is not one of its dirty paths`);
    entries.push(e);
  }
  return { base, dirty, removed, entries, text };
}

/** The text of an overlay (sorted, as parseOverlay reads it back). */
export function formatOverlay(base: string, dirty: Iterable<string>, removed: Iterable<string>, entries: readonly ManifestEntry[]): string {
  const head = JSON.stringify({ overlay: 1, base, dirty: [...dirty].sort(comparePaths), removed: [...removed].sort(comparePaths) });
  return [head, ...entries.map(formatEntry), ''].join('\n');
}

/** The changes an overlay records (a parsed overlay, or what a change set or a merge did). */
export interface OverlayChanges {
  dirty: ReadonlySet<string>;
  removed: ReadonlySet<string>;
  /** Sorted by comparePaths; every path is a dirty one. */
  entries: readonly ManifestEntry[];
}

/**
 * `p` applied on top of `a` (an overlay already relative to the same base file), as one
 * overlay of that base: a reader of the result sees what a reader of the base patched by
 * `a`, then by `p`, sees. Dirty and removed paths are the unions; `a`'s entries stay unless
 * `p` replaces them (a dirty path of `p`) or removes them (at or below a removed path of
 * `p`), `p`'s entries are merged in. `a` null: `p` alone.
 */
export function composeOverlay(a: OverlayChanges | null, p: OverlayChanges): OverlayChanges {
  if (a === null) return p;
  const kept = a.entries.filter((e) => !p.dirty.has(e.p) && !isUnderAny(e.p, p.removed));
  const entries: ManifestEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < kept.length || j < p.entries.length) {
    if (j === p.entries.length || (i < kept.length && comparePaths(kept[i]!.p, p.entries[j]!.p) < 0)) entries.push(kept[i++]!);
    else entries.push(p.entries[j++]!);
  }
  return { dirty: new Set([...a.dirty, ...p.dirty]), removed: new Set([...a.removed, ...p.removed]), entries };
}

/**
 * The digest of a manifest with its overlay, as the state records it: the sha256 of the
 * base manifest's sha256 and the overlay's text (`baseSha256` given: the base is not
 * read). A manifest without an overlay: the sha256 of the file, as before overlays.
 */
export function overlayDigest(baseSha256: string, overlayText: string): string {
  return createHash('sha256').update(`${baseSha256}\n`).update(overlayText).digest('hex');
}

/** The digest of `manifest` as it is now (see overlayDigest): O(manifest) (the base is hashed). */
export function manifestDigest(manifest: string): string {
  const o = readOverlay(manifest);
  const base = hashFile(manifest);
  return o === null ? base : overlayDigest(base, o.text);
}

/**
 * An overlay as readers apply it: `drops(p)` for a base line to leave out, the entries to
 * merge in. `points`: every path the overlay names, sorted (a run of base lines copied as
 * bytes stops before the next one, see ManifestCursor).
 */
export class OverlayView {
  readonly entries: readonly ManifestEntry[];
  readonly byPath: ReadonlyMap<string, ManifestEntry>;
  /** True for a base line the overlay replaces or removes. */
  readonly drops: (p: string) => boolean;
  private readonly points: string[];

  constructor(readonly overlay: ManifestOverlay) {
    this.entries = overlay.entries;
    this.byPath = new Map(overlay.entries.map((e) => [e.p, e]));
    this.points = [...new Set([...overlay.dirty, ...overlay.removed])].sort(comparePaths);
    this.drops = dropsOf(overlay.dirty, overlay.removed);
  }

  /** The first path the overlay names that sorts after `p`, or null. */
  nextPointAfter(p: string): string | null {
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (comparePaths(this.points[mid]!, p) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.points.length ? this.points[lo]! : null;
  }
}

/** Whether an overlay of these dirty and removed paths drops a base line (the line of a dirty path, or one below a removed path). */
export function dropsOf(dirty: ReadonlySet<string>, removed: ReadonlySet<string>): (p: string) => boolean {
  const tops = new Set([...dirty, ...removed].map(top));
  return (p) => tops.has(top(p)) && (dirty.has(p) || isUnderAny(p, removed));
}

function top(p: string): string {
  const i = p.indexOf('/');
  return i === -1 ? p : p.slice(0, i);
}

/** The view of each overlay parse (see `parsed`): made once per parse. */
const views = new WeakMap<ManifestOverlay, OverlayView>();

/** The overlay view of `manifest`, or null. */
export function overlayViewOf(manifest: string): OverlayView | null {
  const o = readOverlay(manifest);
  return o === null ? null : viewOf(o);
}

/** The view of a parse (made once per parse). */
export function viewOf(o: ManifestOverlay): OverlayView {
  let v = views.get(o);
  if (v === undefined) views.set(o, (v = new OverlayView(o)));
  return v;
}
