import * as fs from 'node:fs';
import { ManifestReader, ManifestWriter, entryFromStat, readEntry } from './manifest.js';
import { readXattrs, xattrDigest } from '../core/xattr.js';
import type { ManifestEntry } from './manifest-line.js';
import { hostPath } from '../core/names.js';
import { comparePaths, isUnder, isUnderAny } from '../core/paths.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { hashFile } from '../core/hash.js';
import { composeOverlay, formatOverlay, overlayDigest, readOverlay } from './manifest-overlay.js';

/** What happened to a tree path (RootFs reports each write), for incremental manifest updates. */
export interface TouchEvent {
  kind: 'touch' | 'remove';
  /** Real tree-relative path (after resolving symlinks inside the root). */
  path: string;
  /**
   * A file linked from a trusted store (a layer store object): its content's sha256, and
   * the object. When the path is still that object's inode, its manifest line takes this
   * hash instead of reading the file (as a copy trusts the base tree's linked files).
   */
  known?: { sha256: string; object: string };
}

/**
 * Rewrites a manifest after a change set was applied to its tree, in one streaming pass:
 * entries of removed subtrees and of touched paths are dropped, touched paths that
 * still exist are re-read from the tree (and re-hashed). Cost is O(manifest lines) of
 * string work plus O(changes) of disk work; the tree itself is not walked again.
 * Returns the touched paths that exist afterwards (the update's delta).
 */
export interface PatchResult {
  /** Paths the change set created or changed, that exist afterwards. */
  delta: string[];
  /** Their new manifest entries (what finalize re-checks). */
  changed: ManifestEntry[];
  /** Paths removed and not re-created. */
  removed: string[];
  /** Lines in the new manifest. */
  entries: number;
  /** The new manifest's sha256, hashed as it was written. */
  sha256?: string;
}

/** What a change set did to a tree, from its touch events: the paths to re-read and the subtrees gone. */
export interface TreeChanges {
  dirty: Set<string>;
  removed: Set<string>;
  /** The entries of the dirty paths that exist afterwards, re-read from the tree, in manifest order. */
  fresh: ManifestEntry[];
  /** True for a removed path or a path below one. */
  underRemoved(p: string): boolean;
}

/**
 * `read` gives the entry now at a tree path (null: nothing there); by default it is read
 * from the disk (a dry run reads its overlay). `linksHold`: the tree was written only
 * through RootFs since the events began (see readKnown): a linked path whose ancestors
 * were not removed since its link is taken as its object's inode without a look at the object.
 */
export function changesOf(tree: string, events: readonly TouchEvent[], read: (rel: string) => ManifestEntry | null = (rel) => readOnDisk(tree, rel), o: { linksHold?: boolean } = {}): TreeChanges {
  const removed = new Set<string>();
  const dirty = new Set<string>();
  const known = new Map<string, { sha256: string; object: string }>();
  // With linksHold: the index of each known link's event, and of the last removal at each
  // path (an ancestor removed after the link may have become a symlink: then the link's
  // path is not that inode, and the object is looked at as without linksHold).
  const linkedAt = new Map<string, number>();
  const removedAt = new Map<string, number>();
  events.forEach((ev, i) => {
    if (ev.path === '') return;
    dirty.add(ev.path);
    if (ev.kind === 'remove') {
      removed.add(ev.path);
      if (o.linksHold === true) removedAt.set(ev.path, i);
    }
    // The last event of a path says what is there: a later one without a hash makes it unknown.
    if (ev.known !== undefined) {
      known.set(ev.path, ev.known);
      if (o.linksHold === true) linkedAt.set(ev.path, i);
    } else if (known.size > 0) known.delete(ev.path);
  });
  /** Whether no ancestor of `rel` was removed after its link (linksHold). */
  const holds = (rel: string): boolean => {
    if (o.linksHold !== true) return false;
    if (removedAt.size === 0) return true;
    const at = linkedAt.get(rel)!;
    for (let i = rel.lastIndexOf('/'); i > 0; i = rel.lastIndexOf('/', i - 1)) if ((removedAt.get(rel.slice(0, i)) ?? -1) > at) return false;
    return true;
  };
  const fresh: ManifestEntry[] = [];
  for (const rel of dirty) {
    const k = known.get(rel);
    const e = k === undefined ? read(rel) : readKnown(tree, rel, k, holds(rel)) ?? read(rel);
    if (e !== null) fresh.push(e); // else touched, then removed
  }
  fresh.sort((a, b) => comparePaths(a.p, b.p));

  const underRemoved = (p: string): boolean => isUnderAny(p, removed);
  return { dirty, removed, fresh, underRemoved };
}

/**
 * The entry at `rel` with the store's hash, when it is still the store object's inode
 * (else null: read it). `linksHold`: that is known (changesOf's linksHold: a stage's own
 * work tree, written only through RootFs, whose every write and removal is an event; the
 * link is the path's last event and no ancestor was removed since, so every directory on
 * the way is the one the link went through): the object is not looked at again.
 */
function readKnown(tree: string, rel: string, k: { sha256: string; object: string }, linksHold: boolean): ManifestEntry | null {
  const host = hostPath(tree, rel);
  try {
    const st = fs.lstatSync(host);
    if (!st.isFile()) return null;
    if (!linksHold) {
      const obj = fs.lstatSync(k.object);
      if (st.ino !== obj.ino || st.dev !== obj.dev) return null;
    }
    return entryFromStat(rel, st, { h: k.sha256, x: xattrDigest(readXattrs(host)) });
  } catch {
    return null;
  }
}

/** The manifest entry of what is on disk at a tree path now, or null. */
export function readOnDisk(tree: string, rel: string): ManifestEntry | null {
  const host = hostPath(tree, rel);
  let st: fs.Stats;
  try {
    st = fs.lstatSync(host);
  } catch {
    return null;
  }
  return readEntry(rel, host, st);
}

/**
 * Every path an update changed, for people and agents (`stage --json`'s `delta`): the
 * paths it wrote and the paths it removed, in manifest order.
 */
export function changedPaths(r: Pick<PatchResult, 'delta' | 'removed'>): string[] {
  return [...r.delta, ...r.removed].sort(comparePaths);
}

/**
 * The paths of the base manifest a change set removed, noted as the manifest is
 * rewritten (in its order): every line dropped because the change set removed or
 * replaced it or a parent, and that the new tree no longer has. A whole-tree source
 * (`--replace`, an OS image) removes the tree and writes it again, so only these lines
 * tell the files it dropped (an `etc/b.conf` the new image lacks) from the ones it
 * wrote again. Only the topmost path of a removed subtree is kept: what is below it is
 * removed with it.
 */
export class RemovedLines {
  private readonly out: string[] = [];
  private last: string | null = null;

  /** A base line dropped because of the change set, its path absent from the new tree; true when `p` is kept (topmost). */
  note(p: string): boolean {
    if (this.last !== null && isUnder(p, this.last)) return false;
    this.out.push(p);
    this.last = p;
    return true;
  }

  paths(): readonly string[] {
    return this.out;
  }
}

/**
 * The delta of a patched manifest (what finalize re-checks and the merge reads): the
 * paths the change set removed by name and the base lines it dropped (see RemovedLines),
 * less what exists afterwards.
 */
export function deltaOf(ch: TreeChanges, entries: number, dropped: RemovedLines = new RemovedLines()): PatchResult {
  const present = new Set(ch.fresh.map((e) => e.p));
  const removed = new Set([...ch.removed].filter((p) => !present.has(p)));
  for (const p of dropped.paths()) removed.add(p);
  return { delta: ch.fresh.map((e) => e.p), changed: ch.fresh, removed: [...removed].sort(), entries };
}

export function patchManifest(tree: string, before: string | readonly string[], after: string, events: readonly TouchEvent[], faults: FaultHook = noFaults, durable = false): PatchResult {
  const { dirty, fresh, underRemoved, ...ch } = changesOf(tree, events);

  // `before` was written by copyTree moments ago, line by line in ManifestWriter's
  // format: its untouched lines are copied through as they are, never re-parsed.
  // Several files (the parts of a split copy) are read one after the other, in order.
  const w = new ManifestWriter(after, faults, { sha256: true });
  const present = new Set(fresh.map((e) => e.p));
  const dropped = new RemovedLines();
  let k = 0;
  let entries = 0;
  try {
    for (const file of typeof before === 'string' ? [before] : before) {
      const r = new ManifestReader(file);
      try {
        for (let e = r.nextRaw(); e !== null; e = r.nextRaw()) {
          while (k < fresh.length && comparePaths(fresh[k]!.p, e.p) < 0) w.write(fresh[k++]!);
          if (dirty.has(e.p) || underRemoved(e.p)) {
            if (!present.has(e.p)) dropped.note(e.p);
            continue;
          }
          w.writeLine(e.p, e.line);
        }
      } finally {
        r.close();
      }
    }
    while (k < fresh.length) w.write(fresh[k++]!);
    entries = w.count;
  } finally {
    w.close(durable);
  }
  return { ...deltaOf({ dirty, fresh, underRemoved, ...ch }, entries, dropped), sha256: w.sha256() };
}

/**
 * Records a change set applied to a deployment's tree as its manifest's overlay (see
 * manifest-overlay.ts), composed with the overlay the manifest has already (the stage's,
 * relative to the file it linked from its base; a merge redone after a crash: its events
 * name every path the earlier one touched): the paths the change set touched are re-read
 * from the tree, the earlier overlay's other entries kept. O(changes): the base manifest
 * is neither read nor rewritten. `baseSha256`: the manifest's sha256 as recorded at stage
 * (the file's, when it has no overlay; hashed when unknown). Returns the overlay's text,
 * which the caller writes atomically beside the manifest (see overlayFile), and the
 * digest the state records for the pair.
 */
export function patchOverlay(tree: string, manifest: string, events: readonly TouchEvent[], baseSha256: string | null): { text: string; digest: string } {
  const had = readOverlay(manifest);
  const ch = changesOf(tree, events);
  const o = composeOverlay(had, { dirty: ch.dirty, removed: ch.removed, entries: ch.fresh });
  const base = had?.base ?? baseSha256 ?? hashFile(manifest);
  const text = formatOverlay(base, o.dirty, o.removed, o.entries);
  return { text, digest: overlayDigest(base, text) };
}
