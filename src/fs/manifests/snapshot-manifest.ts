import * as fs from 'node:fs';
import { hashFile } from '../core/hash.js';
import { ManifestWriter, entryFromStat, readEntry, unchangedSince } from './manifest.js';
import { formatEntry, isFileLineFor, lineSize, parseManifestLine, type ManifestEntry } from './manifest-line.js';
import { ManifestCursor } from './manifest-cursor.js';
import { RemovedLines, changedPaths, changesOf, deltaOf, type PatchResult, type TouchEvent, type TreeChanges } from './patch-manifest.js';
import { compareEntry } from './verify-tree.js';
import { readOverlay, type ManifestOverlay } from './manifest-overlay.js';
import { OverlaySink, OverlayTooBig, WholeSink, composeLinked, linkWithOverlay, overlayBound, type ManifestSink } from './linked-manifest.js';
import { lstatInTree } from '../core/tree-lstat.js';
import type { TaskHooks } from '../jobs/tree-tasks.js';
import { walk } from '../core/walk.js';
import { readXattrs, xattrDigest, xattrsSupported } from '../core/xattr.js';
import { comparePaths, isUnder } from '../core/paths.js';
import { manifestDelta } from './diff-manifests.js';
import { ioError } from '../core/io-error.js';
import { readSummary, writeSummary, type ManifestTotals } from './manifest-summary.js';

export interface SnapshotManifestArgs {
  /** The snapshot of the base tree, with the change set applied. */
  tree: string;
  /** The base tree's manifest. */
  base: string;
  out: string;
  /**
   * Prefixes whose entries are taken from the base manifest without a look at the tree
   * (the hardlink prefixes: usr/ is read-only on a booted host). Everything else is
   * walked, as a copy would walk it, so local changes the running system made there
   * are recorded.
   */
  trust: string[];
  /** The base tree the snapshot or copy was made from (its unchanged files' hashes are reused). */
  baseTree?: string;
  /** What the change set touched (re-read from the tree, wherever they are). */
  events: TouchEvent[];
  /**
   * Link `base`'s file at `out` and write only an overlay of what differs (see
   * linked-manifest.ts), when the base file's sha256 is known: `digest`, the base
   * deployment's recorded manifest digest (the file's own when it has no overlay; with
   * one, the overlay's header names it), `entries` its line count (the overlay's bound).
   * Absent: the manifest is written whole.
   */
  link?: { digest: string | null; entries: number | null };
  /**
   * The tree is the stage's own, written only through RootFs since its copy (no command
   * ran in it), so a path whose last event links a store object is that object's inode
   * (changesOf's linksHold: its line takes the object's hash without a look at the object).
   */
  linksHold?: boolean;
  /**
   * The result's delta (delta, changed, removed) is what differs from `base` to the
   * manifest written (manifestDelta: one merge of the two, in this task), not what the
   * events touched: a tree a command changed, or one the change set replaced whole.
   * `same` is then empty (not computed).
   */
  deltaAgainstBase?: boolean;
}

export interface SnapshotManifestResult extends PatchResult {
  bytes: number;
  walked: number;
  hashed: number;
  /** `out` is a link to the base's file with an overlay beside it (else written whole). */
  linked: boolean;
  /** A summary of the linked file was written beside `out` (see manifest-summary.ts). */
  summarized?: true;
  /**
   * The paths of the delta (changedPaths: written or removed) whose entry in the new
   * manifest is the base manifest's (compareEntry: type, mode, owner, content, target,
   * extended attributes), or which neither has: an update that wrote a path as it was.
   * Read from the base's lines the pass meets at those paths, so that the activation
   * decision needs no lookup in the two manifests afterwards (see changedByManifests).
   */
  same: string[];
}

/**
 * The manifest of a deployment made from a snapshot of the base tree, in one pass: the
 * base manifest's lines under the trusted prefixes are copied through unparsed (the
 * trees under them are never walked), the rest of the snapshot is walked and recorded
 * as a copy records it (unchanged files keep their line, changed ones are hashed), and
 * the paths the change set touched are re-read wherever they are. O(lines) of string
 * work, O(untrusted entries + changes) of disk work. Returns the delta as patchManifest does.
 */
export function snapshotManifest(a: SnapshotManifestArgs, h: Pick<TaskHooks, 'faults' | 'checkAbort' | 'skip'>): SnapshotManifestResult {
  const r = writeSnapshotManifest(a, h);
  if (a.deltaAgainstBase !== true) return r;
  const d = manifestDelta(a.base, a.out);
  return { ...r, delta: d.changed.map((e) => e.p), changed: d.changed, removed: d.removed, same: [] };
}

function writeSnapshotManifest(a: SnapshotManifestArgs, h: Pick<TaskHooks, 'faults' | 'checkAbort' | 'skip'>): SnapshotManifestResult {
  const ch = changesOf(a.tree, a.events, undefined, { linksHold: a.linksHold === true });
  const linked = a.link === undefined || a.trust.length === 0 ? null : linkedPass(a, h, ch);
  if (linked !== null) return linked;
  const out = new ManifestWriter(a.out, h.faults, { sha256: true });
  let r: PassResult;
  try {
    r = manifestPass(a, h, ch, new WholeSink(out));
  } finally {
    out.close(false);
  }
  return { ...r, sha256: out.sha256(), linked: false };
}

/**
 * The pass into an overlay: null when the overlay passes its bound, the base's digest is
 * unknown or the filesystem will not link (the caller writes the manifest whole).
 */
function linkedPass(a: SnapshotManifestArgs, h: Pick<TaskHooks, 'faults' | 'checkAbort' | 'skip'>, ch: TreeChanges): SnapshotManifestResult | null {
  const had = readOverlay(a.base);
  const baseSha = had?.base ?? a.link?.digest ?? null;
  if (baseSha === null) return null;
  const bound = overlayBound(a.link?.entries ?? 0);
  if ((had?.dirty.size ?? 0) + (had?.removed.size ?? 0) + ch.dirty.size > bound) return null;
  const sink = new OverlaySink(a.out, bound);
  // The base file's summary, when it is this file's: its unchanged runs are passed over uncounted.
  const key = { sha256: baseSha, size: fileSize(a.base) };
  const summary = readSummary(a.base, key.sha256, key.size);
  let r: PassResult;
  let totals: ManifestTotals | null = null;
  try {
    r = manifestPass(a, h, ch, sink, had, { ...(summary === null ? {} : { baseTotals: summary }), onTotals: (t) => (totals = t) });
  } catch (err) {
    if (err instanceof OverlayTooBig) return null;
    throw err;
  }
  const o = composeLinked(baseSha, had, sink, bound);
  if (o === null || !linkWithOverlay(a.base, a.out, o.text, h.faults)) return null;
  // The new manifest is the same file: its summary too (the next stage's pass skips its runs).
  const t: ManifestTotals | null = totals;
  if (t !== null) writeSummary(a.out, key, t, h.faults);
  return { ...r, sha256: o.digest, linked: true, ...(t === null ? {} : { summarized: true as const }) };
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch (err) {
    throw ioError(err, file, file, 'sysroot');
  }
}

type PassResult = Omit<SnapshotManifestResult, 'sha256' | 'linked'>;

/** The delta's paths whose new entry (`fresh`, none for a removed one) is the base's line at it (`baseAt`, none when the base has none). */
function samePaths(result: PatchResult, ch: TreeChanges, baseAt: ReadonlyMap<string, string>, file: string): string[] {
  const fresh = new Map(ch.fresh.map((e) => [e.p, e] as const));
  return changedPaths(result).filter((p) => {
    const was = baseAt.get(p);
    const now = fresh.get(p) ?? null;
    if (was === undefined || now === null) return was === undefined && now === null;
    return compareEntry(parseManifestLine(was, file, `the line of ${p}`), now).length === 0;
  });
}

/**
 * One pass over the base manifest and the snapshot, into `sink` (the whole manifest, or
 * what differs from the base). The walk's side effects (a socket or device node removed)
 * are the same in a second pass: it finds them gone, as the first left the tree.
 * `baseOverlay`: the base's overlay when the caller has read it (not read again).
 */
function manifestPass(
  a: SnapshotManifestArgs,
  h: Pick<TaskHooks, 'faults' | 'checkAbort' | 'skip'>,
  ch: TreeChanges,
  out: ManifestSink,
  baseOverlay?: ManifestOverlay | null,
  /** `baseTotals`: the base file's summary, checked against it (its runs are then skipped uncounted); `onTotals`: told the base file's totals once it is read. */
  o: { baseTotals?: ManifestTotals; onTotals?: (t: ManifestTotals | null) => void } = {},
): PassResult {
  const freshOf = new Map(ch.fresh.map((e) => [e.p, e] as const));
  let bytes = 0;
  let walked = 0;
  let hashed = 0;
  // Only a prefix that is a real directory in the snapshot is trusted.
  const trust = a.trust.filter((t) => {
    try {
      return fs.lstatSync(`${a.tree}/${t}`).isDirectory();
    } catch {
      return false;
    }
  });
  /** The trusted prefix `p` is strictly below, or null. */
  const trustedPrefixOf = (p: string): string | null => trust.find((t) => p !== t && isUnder(p, t)) ?? null;
  const trusted = (p: string): boolean => trustedPrefixOf(p) !== null;
  // Every touched path, sorted: a run of base lines copied as bytes stops at the next one.
  const dirtySorted = [...ch.dirty].sort(comparePaths);
  let d = 0;
  const nextDirtyAfter = (p: string): string | null => {
    while (d < dirtySorted.length && comparePaths(dirtySorted[d]!, p) <= 0) d += 1;
    return d < dirtySorted.length ? dirtySorted[d]! : null;
  };
  const earliest = (...ps: (string | null)[]): string | null => ps.reduce<string | null>((a, b) => (b === null ? a : a === null || comparePaths(b, a) < 0 ? b : a), null);
  // The touched entries under trusted prefixes, in order; the walk finds the others.
  const freshTrusted = ch.fresh.filter((e) => trusted(e.p));
  let k = 0;
  /**
   * True when `st` is the copy of the base tree's file that `old` was recorded from, and
   * that file is unchanged since (see unchangedSince): what the copy read is what `old`
   * hashed. The copy keeps size and mtime; the staging tree is private to this stage.
   */
  const baseDirs = new Set<string>();
  const copiedUnchanged = (old: ManifestEntry, st: fs.Stats, rel: string): boolean => {
    if (a.baseTree === undefined || old.s !== st.size || old.mt !== Math.trunc(st.mtimeMs)) return false;
    const base = lstatInTree(a.baseTree, rel, baseDirs);
    return base !== null && unchangedSince(old, base);
  };
  const withXattrs = xattrsSupported(a.tree);
  const digest = (host: string | Buffer): string | undefined => (withXattrs ? xattrDigest(readXattrs(host)) : undefined);
  const dropped = new RemovedLines();
  /** The base's lines at the paths the change set touched and at the topmost ones it dropped (see samePaths). */
  const baseAt = new Map<string, string>();
  const prev = new ManifestCursor(a.base, undefined, baseOverlay, o.baseTotals);
  /** A line of the new manifest; `was`: the base's line at its path (null: none). */
  const emit = (p: string, line: string, size: number, was: string | null, e?: ManifestEntry): void => {
    out.put(p, line, was, e);
    bytes += size;
  };
  const emitEntry = (e: ManifestEntry, was: string | null): void => emit(e.p, formatEntry(e), e.t === 'f' ? (e.s ?? 0) : 0, was, e);
  /**
   * Everything before `rel` that the walk does not produce: the base lines under trusted
   * prefixes (untouched ones; a line outside them is a path gone from the tree) and the
   * touched entries under them, merged in order.
   */
  const drain = (rel: string | null): void => {
    for (;;) {
      const r = prev.peekRaw();
      const f = k < freshTrusted.length ? freshTrusted[k]! : null;
      const rIn = r !== null && (rel === null || comparePaths(r.p, rel) < 0);
      const fIn = f !== null && (rel === null || comparePaths(f.p, rel) < 0);
      if (!rIn && !fIn) return;
      if (fIn && (!rIn || comparePaths(f.p, r!.p) <= 0)) {
        const same = rIn && r!.p === f.p;
        emitEntry(f, same ? r!.line : null);
        k += 1;
        if (same) {
          baseAt.set(f.p, r!.line);
          prev.nextRaw();
        }
        continue;
      }
      const t = trustedPrefixOf(r!.p);
      if (t !== null && !ch.dirty.has(r!.p) && !ch.underRemoved(r!.p)) {
        // An untouched run under a trusted prefix (most of the manifest): copied as bytes,
        // up to the next touched path, fresh entry or walked entry.
        const run = out.run(prev, t, earliest(rel, f?.p ?? null, nextDirtyAfter(r!.p)));
        bytes += run.bytes;
        if (run.moved) continue;
      }
      prev.nextRaw();
      const changed = ch.dirty.has(r!.p) || ch.underRemoved(r!.p);
      if (t !== null && !changed) {
        emit(r!.p, r!.line, lineSize(r!.line), r!.line);
        continue;
      }
      out.gone(r!.p);
      // Not in the new tree because of the change set (a line outside the trusted prefixes
      // that the walk did not find, and the change set did not touch, is a local deletion).
      if (changed && (dropped.note(r!.p) || ch.dirty.has(r!.p))) baseAt.set(r!.p, r!.line);
    }
  };
  /** The walk of the snapshot (the one walker, walk.ts), trusted prefixes not entered. */
  const walkSnapshot = (): void => {
    for (const step of walk(a.tree)) {
      if (step.leave) continue;
      h.checkAbort();
      const { rel, host } = step;
      const st = fs.lstatSync(host);
      if (!st.isDirectory() || trust.includes(rel)) step.skip();
      drain(rel);
      const raw = prev.peekRaw()?.p === rel ? prev.nextRaw() : null;
      walked += 1;
      const touched = freshOf.get(rel);
      const was = raw?.line ?? null;
      if (touched !== undefined) {
        emitEntry(touched, was);
        if (was !== null) baseAt.set(rel, was);
      } else if (st.isFile()) {
        // The old line when this very inode is unchanged since it was recorded (a btrfs
        // snapshot keeps inodes); the old hash when the base tree's file is (a copy of it).
        const x = digest(host);
        if (raw !== null && isFileLineFor(raw.line, rel, st, x)) {
          emit(rel, raw.line, st.size, was);
        } else {
          const old = raw === null ? null : prev.entryOf(raw);
          const known = old !== null && (unchangedSince(old, st) || copiedUnchanged(old, st, rel)) ? old.h : undefined;
          if (known === undefined) hashed += 1;
          const e = entryFromStat(rel, st, { h: known ?? hashFile(host), x });
          emit(rel, formatEntry(e), st.size, was, e);
        }
      } else if (st.isDirectory() || st.isSymbolicLink() || st.isFIFO()) {
        const e = readEntry(rel, host, st);
        emit(rel, formatEntry(e), 0, was, e);
      } else {
        if (raw !== null) out.gone(rel);
        // As a copy skips them: sockets and device nodes are not kept, nor recorded.
        try {
          fs.unlinkSync(host);
        } catch (err) {
          throw ioError(err, rel, String(host), 'sysroot');
        }
        h.faults.afterMutation('unlink', String(host));
        h.skip(rel, st.isSocket() ? 'socket' : 'device node');
      }
    }
  };
  try {
    walkSnapshot();
    drain(null);
    // The runs skipped uncounted: what the base file's totals leave of what was read line by line.
    const rest = prev.uncountedTotals();
    if (rest !== null) {
      out.uncounted(rest.lines);
      bytes += rest.bytes;
    }
    o.onTotals?.(prev.fileTotals());
  } finally {
    prev.close();
  }
  const result = deltaOf(ch, out.count, dropped);
  return { ...result, bytes, walked, hashed, same: a.deltaAgainstBase === true ? [] : samePaths(result, ch, baseAt, a.base) };
}
