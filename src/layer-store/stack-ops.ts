import type { ChangeOp } from '../changeset.js';
import { StagedrootError } from '../errors.js';
import { SourceFile } from '../fs/core/file-chunks.js';
import { isUnder } from '../fs/core/paths.js';
import { readLines } from '../fs/trees/layer-store-io.js';
import { decodeXattrs, parseIndexLine, type IndexLine } from './index-lines.js';
import type { LayerStore, StoredLayer } from './store.js';

/** The stored layers of a stack, bottom first, by diff_id (STATE_CORRUPT when one is missing). */
export function storedStack(store: LayerStore, diffIds: readonly string[]): StoredLayer[] {
  return diffIds.map((d) => {
    const l = store.byDiffId(d);
    if (l === null) throw new StagedrootError('STATE_CORRUPT', `The layer ${d} is not in the layer store ${store.dir} (import it first)`, { path: store.layerDir(d) });
    return l;
  });
}

/**
 * The change set ops of a fresh apply of a stack of stored layers, bottom first: the
 * tree cleared, then per layer what layer/plan.ts yields for it (its opaque directories
 * cleared and its whiteouts removed, then its entries in archive order with OCI
 * `replace`, then each directory's final mode and mtime, deepest first), a file's content
 * being its store object: streamed from it, or hardlinked (`linkFrom`) where the stage
 * links. Read from each layer's index line by line: memory does not grow with the stack.
 */
export function* stackOps(store: LayerStore, layers: readonly StoredLayer[], o: StackStart = {}): Generator<ChangeOp> {
  // onto: the tree already holds, under `kept`, the first `onto` layers applied (that part
  // of a copy of a deployment of them, the only part copied): the rest of the tree is built
  // from those layers' other lines, then the layers above are applied whole; nothing is cleared.
  // With `keptLines`, the copy is of a deployment of another stack: those lines turn its `kept` part into this stack's.
  const onto = o.onto ?? 0;
  if (onto === 0) yield { op: 'clear', path: '' };
  const kept = onto === 0 ? null : (o.kept ?? null);
  for (const [i, layer] of layers.entries()) {
    if (i < onto && kept === null) continue;
    const links = new Map<string, string>();
    let noLink: ReadonlySet<string> | undefined;
    // Below onto, the lines under kept are passed over unparsed (but a hardlink's, whose target may be outside).
    for (const l of layerLines(layer, i < onto ? (raw) => rawUnder(raw, kept!) : undefined, links)) {
      // layerLines' first pass, done before its first line, filled `links`.
      noLink ??= o.linkable === undefined ? NONE : crossLinkTargets(links, o.linkable);
      if (i < onto && !replayedOnKept(l, kept!)) continue;
      yield lineOp(store, l, noLink);
    }
  }
  for (const l of o.keptLines ?? []) yield lineOp(store, l);
}

const NONE: ReadonlySet<string> = new Set();

/**
 * The files of a layer that a hardlink joins to a path the stage would not link from the
 * store (`linkable` false at either end, by name), following chains of hardlinks to the
 * file they name. Such a file is written as a copy: linked from the store, the name
 * outside the linked prefixes (etc/x, written in place on the running machine) would
 * share the store object's inode with every tree linked from it. `to`: the layer's
 * hardlinks, name to target (layerLines collects them; a hardlink names a file earlier in its layer).
 */
export function crossLinkTargets(to: ReadonlyMap<string, string>, linkable: (rel: string) => boolean): Set<string> {
  const crossing = [...to].filter(([p, target]) => !linkable(p) || !linkable(target)).map(([, target]) => target);
  const out = new Set<string>();
  for (let p of crossing) {
    // A chain a -> b -> c ends at the file c; `out` guards against a loop.
    while (!out.has(p)) {
      out.add(p);
      const next = to.get(p);
      if (next === undefined) break;
      p = next;
    }
  }
  return out;
}

/** The change set op of an index line (a file's content its store object, streamed or linked; only streamed for a file in `noLink`). */
function lineOp(store: LayerStore, l: IndexLine, noLink: ReadonlySet<string> = NONE): ChangeOp {
  switch (l.t) {
    case 'd':
      return { op: 'mkdir', path: l.p, mode: (l.m ?? 0o755) | 0o700, uid: l.u, gid: l.g, replace: true, xattrs: decodeXattrs(l.x) };
    case 'f': {
      const file = store.objectPath(l.k);
      const content = { kind: 'stream' as const, size: l.s, open: () => objectChunks(file) };
      return { op: 'write', path: l.p, content: noLink.has(l.p) ? content : { ...content, linkFrom: { file, sha256: l.h } }, mode: l.m, uid: l.u, gid: l.g, mtime: l.mt, replace: true, xattrs: decodeXattrs(l.x) };
    }
    case 'l':
      return { op: 'symlink', path: l.p, target: l.to, uid: l.u, gid: l.g, replace: true, xattrs: decodeXattrs(l.x) };
    case 'h':
      return { op: 'hardlink', path: l.p, target: l.to, replace: true };
    case 'a':
      return { op: 'setattr', path: l.p, mode: l.m, mtime: l.mt };
    case 'o':
      return { op: 'clear', path: l.p };
    case 'w':
      return { op: 'remove', path: l.p, recursive: true, missingOk: true };
  }
}

/**
 * A stored layer's index lines in the order a fresh apply takes them: its opaque
 * directories, then its whiteouts (both hide what the layers below made), then its
 * entries in archive order. The index is read twice, the first time keeping only those
 * few lines (and, given `hardlinks`, each hardlink's name and target, filled before the
 * first line is yielded): memory grows with the whiteouts and hardlinks, never with the layer.
 */
export function* layerLines(layer: StoredLayer, skip?: (raw: string) => boolean, hardlinks?: Map<string, string>): Generator<IndexLine> {
  yield* orderedLines<never>(layer, skip, hardlinks, () => null);
}

/** A line as keptApart reads it: an index line, or a file's, directory's, attribute or symlink line's type and path alone. */
export type PathLine = IndexLine | { t: 'f' | 'd' | 'a' | 'l'; p: string };

/**
 * layerLines for what reads only a line's type and path (keptApart): a file, directory
 * or attribute line whose path is a plain JSON string (no escape) is given as its type
 * and path, sliced from the text, not parsed; every other line is parsed as layerLines
 * parses it, in the same order.
 */
export function* layerPathLines(layer: StoredLayer): Generator<PathLine> {
  yield* orderedLines<PathLine>(layer, undefined, undefined, (line, t) => {
    if (t !== 'f' && t !== 'd' && t !== 'a') return null;
    const p = rawPath(line);
    return p === null ? null : { t, p };
  });
}

function* orderedLines<T>(layer: StoredLayer, skip: ((raw: string) => boolean) | undefined, hardlinks: Map<string, string> | undefined, light: (line: string, t: string) => T | null): Generator<T | IndexLine> {
  const marks = markerLines(layer, hardlinks !== undefined);
  for (const [p, to] of marks.links) hardlinks?.set(p, to);
  yield* marks.opaque;
  yield* marks.whiteouts;
  yield* entryLines(layer, skip, light);
}

/** What a layer's first pass reads (orderedLines): its opaque directories and whiteouts, and (withLinks) its hardlinks, name and target, in archive order. */
export interface MarkerLines {
  opaque: IndexLine[];
  whiteouts: IndexLine[];
  links: [string, string][];
}

/** The first pass over a layer's index (see orderedLines): only its opaque, whiteout and (withLinks) hardlink lines parsed. */
export function markerLines(layer: StoredLayer, withLinks: boolean): MarkerLines {
  const out: MarkerLines = { opaque: [], whiteouts: [], links: [] };
  // A line's type read from its text (import writes `{"t":"X",…`): the other lines are not parsed in the first pass.
  for (const line of readLines(layer.index)) {
    if (line === '') continue;
    const t = rawType(line);
    if (t !== null && t !== 'o' && t !== 'w' && (t !== 'h' || !withLinks)) continue;
    const l = parseIndexLine(line, layer.index);
    if (l.t === 'o') out.opaque.push(l);
    else if (l.t === 'w') out.whiteouts.push(l);
    else if (l.t === 'h' && withLinks) out.links.push([l.p, l.to]);
  }
  return out;
}

/** The second pass (see orderedLines): the layer's entries in archive order, opaque and whiteout lines left out; `light` may give a line without parsing it. */
export function* entryLines<T>(layer: StoredLayer, skip: ((raw: string) => boolean) | undefined, light: (line: string, t: string) => T | null): Generator<T | IndexLine> {
  for (const line of readLines(layer.index)) {
    if (line === '') continue;
    const t = rawType(line);
    if (t === 'o' || t === 'w') continue;
    if (skip !== undefined && t !== null && t !== 'h' && skip(line)) continue;
    const lit = t === null ? null : light(line, t);
    if (lit !== null) {
      yield lit;
      continue;
    }
    const l = parseIndexLine(line, layer.index);
    if (l.t !== 'o' && l.t !== 'w') yield l;
  }
}

/** An index line's path from its text as import writes it (`{"t":"X","p":"…"`), or null when it is not plain (escapes: then parsed). */
export function rawPath(line: string): string | null {
  if (!line.startsWith('"p":"', 9)) return null;
  const end = line.indexOf('"', 14);
  if (end <= 14) return null;
  const bs = line.indexOf('\\', 14);
  return bs !== -1 && bs < end ? null : line.slice(14, end);
}

/** The type of an index line as import writes it (`{"t":"X","p":…`), or null for any other text (then parsed). */
export function rawType(line: string): string | null {
  return line.startsWith('{"t":"') && line[7] === '"' ? line[6]! : null;
}

/** Whether an index line's path (its text, as import writes it) is `kept` or under it; false when unsure. */
function rawUnder(line: string, kept: string): boolean {
  const head = `"p":${JSON.stringify(kept).slice(0, -1)}`;
  if (rawType(line) === null || !line.startsWith(head, 9)) return false;
  const c = line[9 + head.length];
  return c === '"' || c === '/';
}

/**
 * Where a stack's ops start (stackOps): `onto` bottom layers already in the tree under
 * `kept` (absent: the whole tree holds them, nothing of them applied); `lowerOutside`, how
 * many lines of those layers are outside `kept` (keptApart's count, for countStackOps).
 */
export interface StackStart {
  onto?: number;
  kept?: string;
  lowerOutside?: number;
  /** Lines applied last, under `kept` (keptDelta's: the copy is of another stack's tree). */
  keptLines?: IndexLine[];
  /** Where the stage links files from the store, by path (crossLinkTargets: a file a hardlink joins to elsewhere is copied). */
  linkable?: (rel: string) => boolean;
}

/** How many ops stackOps yields (for progress): one per index line applied, and the clear. */
export function countStackOps(layers: readonly StoredLayer[], o: StackStart = {}): number {
  const onto = o.onto ?? 0;
  return (onto === 0 ? 1 : (o.lowerOutside ?? 0)) + layers.slice(onto).reduce((n, l) => n + l.record.entries, 0) + (o.keptLines?.length ?? 0);
}

/** Whether a lower layer's line is applied to a tree that holds the stack's `kept` part (see keptApart): not under it, or a hardlink from it to the rest. */
export function replayedOnKept(l: PathLine, kept: string): boolean {
  return !isUnder(l.p, kept) || (l.t === 'h' && !isUnder(l.to, kept));
}

/**
 * Whether the tree a stack of layers builds is, under `kept` (usr), independent of their
 * lines outside it and the other way round, so that a tree holding those layers' `kept`
 * part (a copy of a deployment's usr/) plus their other lines applied in order (and the
 * hardlinks from `kept` to the rest: replayedOnKept) is the fresh apply of the stack. It
 * is not when a line's path (or a hardlink's target) has a symlink of the tree above it
 * when the line applies (a write through it may land on the other side), when the root is
 * an opaque directory, when a shared directory is inside `kept` (the stage diverts the
 * entries there), or when a hardlink joins the two sides (the link outside `kept` would
 * share the copied file's inode with the base tree and the store). Simulated in apply order
 * (layerLines) over the paths alone: the symlinks of the tree at each line. Also counts the
 * lines replayed.
 */
export function keptApart(layers: readonly StoredLayer[], kept: string, shared: readonly string[] = [], linesOf: (layer: StoredLayer) => Iterable<PathLine> = layerPathLines): { apart: boolean; outside: number } {
  if (shared.some((d) => isUnder(d, kept))) return { apart: false, outside: 0 };
  const check = new ApartCheck(kept);
  for (const layer of layers) for (const l of linesOf(layer)) if (!check.line(l)) return check.result();
  return check.result();
}

/**
 * keptApart's simulation one line at a time (apply order), so that a reader can feed it
 * while it reads the lines for something else, and fork it (clone) where two stacks
 * share their bottom layers (keptDelta).
 */
export class ApartCheck {
  private symlinks = new Set<string>();
  /** Hardlinks joining the two sides: the copied usr/ file's inode is the base tree's (and the store's), and the link replayed outside usr/ would share it with them (written in place there). */
  private crossing = 0;
  /** A line went through a symlink of the tree (or the root was opaque). */
  private through = false;
  /** The lines replayed on a tree holding `kept` (replayedOnKept). */
  outside = 0;

  constructor(readonly kept: string) {}

  clone(): ApartCheck {
    const c = new ApartCheck(this.kept);
    c.symlinks = new Set(this.symlinks);
    c.crossing = this.crossing;
    c.through = this.through;
    c.outside = this.outside;
    return c;
  }

  result(): { apart: boolean; outside: number } {
    return { apart: !this.through && this.crossing === 0, outside: this.outside };
  }

  /** Takes the next line; false once the tree is not apart whatever follows (a line through a symlink, the root opaque). */
  line(l: PathLine): boolean {
    if (this.through) return false;
    const kept = this.kept;
    if (replayedOnKept(l, kept)) this.outside += 1;
    if (this.throughSymlink(l.p) || (l.t === 'h' && this.throughSymlink(l.to))) return !(this.through = true);
    switch (l.t) {
      case 'l':
        this.symlinks.add(l.p);
        break;
      case 'h':
        if (isUnder(l.p, kept) !== isUnder(l.to, kept)) this.crossing += 1;
        this.symlinks.delete(l.p);
        break;
      case 'f':
      case 'd':
        this.symlinks.delete(l.p);
        break;
      case 'w':
        this.dropUnder(l.p, true);
        break;
      case 'o':
        if (l.p === '') return !(this.through = true);
        this.dropUnder(l.p, false);
        break;
      case 'a':
        break;
    }
    return true;
  }

  private throughSymlink(p: string): boolean {
    if (this.symlinks.size === 0) return false;
    for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) if (this.symlinks.has(p.slice(0, i))) return true;
    return false;
  }

  private dropUnder(p: string, self: boolean): void {
    for (const s of this.symlinks) if ((self || s !== p) && isUnder(s, p)) this.symlinks.delete(s);
  }
}

/**
 * How many layers at the bottom of `next` a tree of the stack `base` already holds: all of
 * `base` when it is a strict prefix of `next` (new layers on top), else 0 (the tree is
 * built from the store whole).
 */
export function sharedPrefix(base: readonly string[] | undefined, next: readonly string[]): number {
  if (base === undefined || base.length === 0 || base.length >= next.length) return 0;
  return base.every((d, i) => next[i] === d) ? base.length : 0;
}

async function* objectChunks(file: string): AsyncGenerator<Buffer> {
  const f = SourceFile.open(file);
  try {
    yield* f.chunks();
  } finally {
    f.close();
  }
}
