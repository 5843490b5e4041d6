import { isUnder } from '../fs/core/paths.js';
import type { IndexLine } from './index-lines.js';
import { ApartCheck, entryLines, layerLines, markerLines, rawPath, type MarkerLines } from './stack-ops.js';
import type { StoredLayer } from './store.js';

/**
 * What a stack's layers make under `kept` (usr), modelled from their indexes alone: per
 * path its entry as the fresh apply leaves it (RootFs's semantics with OCI `replace`: a
 * directory over a directory keeps it and takes the attributes the line gives, anything
 * else is replaced with what was below it; a whiteout removes the path, an opaque
 * directory its children; a hardlink is the entry it names; a directory's `a` line its
 * final mode and mtime). Only where the tree is apart (keptApart: no line goes through a
 * symlink) and no line needs a parent the stack did not make: else null.
 */
interface Dir {
  t: 'd';
  m: number;
  u?: number;
  g?: number;
  x?: [string, string][];
  /** The final mode and mtime (the last `a` line). */
  am?: number;
  amt?: number;
  children: Map<string, Node>;
}
type Leaf = Extract<IndexLine, { t: 'f' }> | Extract<IndexLine, { t: 'l' }>;
type Node = Dir | Leaf;

class Model {
  root: Node | null = null;

  constructor(readonly kept: string) {}

  clone(): Model {
    const m = new Model(this.kept);
    m.root = this.root === null ? null : this.root.t === 'd' ? cloneDir(this.root) : this.root;
    return m;
  }

  /** The parent directory of `p` (under kept, or kept itself: null parent) and its name; undefined when a parent is missing. */
  private parent(p: string): { dir: Dir | null; name: string } | undefined {
    if (p === this.kept) return { dir: null, name: p };
    const parts = p.slice(this.kept.length + 1).split('/');
    if (this.root === null || this.root.t !== 'd') return undefined;
    let d: Dir = this.root;
    for (const part of parts.slice(0, -1)) {
      const n: Node | undefined = d.children.get(part);
      if (n === undefined || n.t !== 'd') return undefined;
      d = n;
    }
    return { dir: d, name: parts[parts.length - 1]! };
  }

  private get(p: string): Node | undefined {
    const at = this.parent(p);
    if (at === undefined) return undefined;
    return at.dir === null ? (this.root ?? undefined) : at.dir.children.get(at.name);
  }

  private set(p: string, n: Node | undefined): boolean {
    const at = this.parent(p);
    if (at === undefined) return false;
    if (at.dir === null) this.root = n ?? null;
    else if (n === undefined) at.dir.children.delete(at.name);
    else at.dir.children.set(at.name, n);
    return true;
  }

  /** Applies one line (under kept); false when the model cannot say what it does. */
  apply(l: IndexLine): boolean {
    const cur = this.get(l.p);
    switch (l.t) {
      case 'd': {
        if (cur !== undefined && cur.t === 'd') {
          cur.m = (l.m ?? 0o755) | 0o700;
          if (l.u !== undefined) cur.u = l.u;
          if (l.g !== undefined) cur.g = l.g;
          if (l.x !== undefined) cur.x = l.x;
          return true;
        }
        return this.set(l.p, { t: 'd', m: (l.m ?? 0o755) | 0o700, ...(l.u === undefined ? {} : { u: l.u }), ...(l.g === undefined ? {} : { g: l.g }), ...(l.x === undefined ? {} : { x: l.x }), children: new Map() });
      }
      case 'f':
      case 'l':
        return this.set(l.p, l);
      case 'h': {
        const to = isUnder(l.to, this.kept) ? this.get(l.to) : undefined;
        if (to === undefined || to.t !== 'f') return false;
        return this.set(l.p, { ...to, p: l.p });
      }
      case 'w':
        if (cur === undefined) return true;
        return this.set(l.p, undefined);
      case 'o':
        if (cur !== undefined && cur.t === 'd') cur.children.clear();
        return true;
      case 'a':
        if (cur !== undefined && cur.t === 'd') {
          cur.am = l.m;
          cur.amt = l.mt;
          cur.m = l.m;
        }
        return true;
    }
  }
}

function cloneDir(d: Dir): Dir {
  const children = new Map<string, Node>();
  for (const [k, v] of d.children) children.set(k, v.t === 'd' ? cloneDir(v) : v);
  return { ...d, children };
}

type LinesOf = (layer: StoredLayer) => Iterable<IndexLine>;

/** Simulates `layers` onto `m` (under kept only); false when a line is not modelled. */
function simulate(m: Model, layers: readonly StoredLayer[], linesOf: LinesOf): boolean {
  for (const layer of layers) for (const l of linesOf(layer)) if (isUnder(l.p, m.kept) && !m.apply(l)) return false;
  return true;
}

const sameX = (a: [string, string][] | undefined, b: [string, string][] | undefined): boolean => JSON.stringify(a ?? []) === JSON.stringify(b ?? []);
const sameDir = (a: Dir, b: Dir): boolean => a.m === b.m && a.u === b.u && a.g === b.g && sameX(a.x, b.x) && a.amt === b.amt;
const sameLeaf = (a: Leaf, b: Leaf): boolean => (a.t === 'f' && b.t === 'f' ? a.k === b.k && a.l === b.l : a.t === 'l' && b.t === 'l' ? a.to === b.to && a.u === b.u && a.g === b.g && sameX(a.x, b.x) : false);

/**
 * The lines that turn the `kept` part of a tree of `from` into that of `to`: whiteouts of
 * what went, then the entries that are new or differ (parents first; a directory with its
 * owner and extended attributes, exactly), then the final mode and mtime of every
 * directory made, changed or whose children changed, deepest first.
 */
function diff(from: Model, to: Model): IndexLine[] {
  const removes: IndexLine[] = [];
  const writes: IndexLine[] = [];
  const attrs: IndexLine[] = [];
  const write = (p: string, n: Node): void => {
    if (n.t === 'd') {
      writes.push({ t: 'd', p, m: n.m, ...(n.u === undefined ? {} : { u: n.u }), ...(n.g === undefined ? {} : { g: n.g }), x: n.x ?? [] });
      for (const [name, c] of n.children) write(`${p}/${name}`, c);
      attrs.push({ t: 'a', p, m: n.am ?? n.m, ...(n.amt === undefined ? {} : { mt: n.amt }) });
    } else writes.push({ ...n, p });
  };
  const walk = (p: string, a: Node | undefined, b: Node | undefined): void => {
    if (b === undefined) {
      if (a !== undefined) removes.push({ t: 'w', p });
      return;
    }
    if (a === undefined || a.t !== b.t || (a.t === 'd' && b.t !== 'd') || (a.t !== 'd' && b.t === 'd')) {
      if (a !== undefined) removes.push({ t: 'w', p });
      write(p, b);
      return;
    }
    if (a.t !== 'd' || b.t !== 'd') {
      if (!sameLeaf(a as Leaf, b as Leaf)) writes.push({ ...(b as Leaf), p });
      return;
    }
    const changed = !sameDir(a, b);
    if (changed) writes.push({ t: 'd', p, m: b.m, ...(b.u === undefined ? {} : { u: b.u }), ...(b.g === undefined ? {} : { g: b.g }), x: b.x ?? [] });
    const before = writes.length + removes.length;
    for (const [name, c] of a.children) if (!b.children.has(name)) walk(`${p}/${name}`, c, undefined);
    for (const [name, c] of b.children) walk(`${p}/${name}`, a.children.get(name), c);
    if (changed || writes.length + removes.length > before) attrs.push({ t: 'a', p, m: b.am ?? b.m, ...(b.amt === undefined ? {} : { mt: b.amt }) });
  };
  walk(from.kept, from.root ?? undefined, to.root ?? undefined);
  // attrs were pushed children first (post-order): deepest first already.
  return [...removes, ...writes, ...attrs];
}

export interface KeptDelta {
  /** The lines that turn the base tree's `kept` part into the new stack's (see diff). */
  lines: IndexLine[];
  /** How many lines of the new stack are outside `kept` (applied as they are). */
  outside: number;
}

export interface KeptDeltaOptions {
  /** Model every line of the shared bottom layers, not only those the difference can depend on (the reference the tests compare with). */
  whole?: boolean;
}

/**
 * How a tree of the stack `next` is made from one of `base` by keeping the base's `kept`
 * part (usr/) and changing only what differs there, whatever layer changed: both stacks
 * apart (keptApart) with no hardlink between `kept` and the rest, the `kept` part of each
 * modelled from the indexes (the layers they share at the bottom modelled once), and the
 * difference returned as index lines. The rest of the tree is the new stack's other lines
 * applied in order. Null where the model cannot say (the stage builds the tree whole).
 *
 * Of the shared bottom layers (the base image's bulk: 20,000 lines where the changed layers
 * have a few hundred) only the lines at the paths the difference can depend on are parsed
 * and modelled (Relevant): the two stacks differ only at the paths their upper layers
 * touch and, where one of those lines removes or replaces what was there (a whiteout, an
 * opaque directory, a file, symlink or hardlink), under it; a path's state depends only on
 * the lines at it, at its parents and at the file a hardlink there names. So the model of
 * those paths, their parents and (closed over) the hardlinks' targets is the whole
 * model's there, and elsewhere both stacks' trees are the same. The other lines are read
 * by type and path alone (keptApart's and the hardlink check's pass).
 */
export function keptDelta(base: readonly StoredLayer[], next: readonly StoredLayer[], kept: string, shared: readonly string[] = [], o: KeptDeltaOptions = {}): KeptDelta | null {
  if (shared.some((d) => isUnder(d, kept))) return null; // keptApart's first condition
  let common = 0;
  while (common < base.length && common < next.length && base[common]!.record.diffId === next[common]!.record.diffId) common += 1;
  // The upper layers of either stack, each index parsed once.
  const upper = new Map<string, IndexLine[]>();
  for (const layer of [...base.slice(common), ...next.slice(common)]) if (!upper.has(layer.record.diffId)) upper.set(layer.record.diffId, [...layerLines(layer)]);
  const upperOf = (layer: StoredLayer): readonly IndexLine[] => upper.get(layer.record.diffId)!;
  const relevant = o.whole ? null : new Relevant(kept);
  if (relevant !== null) for (const ls of upper.values()) for (const l of ls) relevant.touched(l);
  // The shared bottom, streamed once (after each index's first pass): keptApart's check (both stacks share it
  // there: forked after) and the model of the relevant lines. A line joining kept and the rest fails the check.
  const bottom = base.slice(0, common);
  const marks = bottom.map((layer) => markerLines(layer, true));
  relevant?.closeOverHardlinks(marks.flatMap((m) => m.links));
  const check = new ApartCheck(kept);
  const model = new Model(kept);
  for (const [i, layer] of bottom.entries()) {
    for (const l of bottomLines(layer, marks[i]!, kept, relevant)) {
      if (!check.line(l)) return null;
      if (!(l instanceof PathOnly) && isUnder(l.p, kept) && (relevant === null || relevant.has(l.p)) && !model.apply(l)) return null;
    }
  }
  const apart = (stack: readonly StoredLayer[]): ApartCheck | null => {
    const c = check.clone();
    for (const layer of stack.slice(common)) for (const l of upperOf(layer)) if (!c.line(l)) return null;
    return c.result().apart ? c : null;
  };
  const nextApart = apart(next);
  if (nextApart === null || apart(base) === null) return null;
  const from = model.clone();
  if (!simulate(from, base.slice(common), upperOf)) return null;
  const to = model;
  if (!simulate(to, next.slice(common), upperOf)) return null;
  return { lines: diff(from, to), outside: nextApart.outside };
}

/** A bottom layer's line read by its type and path alone (not relevant to the model: keptApart's check reads no more). */
class PathOnly {
  constructor(
    readonly t: 'f' | 'd' | 'a' | 'l',
    readonly p: string,
  ) {}
}

/**
 * A bottom layer's lines in apply order (its first pass given): a file, directory,
 * attribute or symlink line at a plain path under `kept` that is not relevant as its type
 * and path sliced from the text (PathOnly), every other line parsed (all of them when
 * `relevant` is null).
 */
function bottomLines(layer: StoredLayer, marks: MarkerLines, kept: string, relevant: Relevant | null): Iterable<PathOnly | IndexLine> {
  const light = (line: string, t: string): PathOnly | null => {
    if (relevant === null || (t !== 'f' && t !== 'd' && t !== 'a' && t !== 'l')) return null;
    const p = rawPath(line);
    return p !== null && isUnder(p, kept) && !relevant.has(p) ? new PathOnly(t, p) : null;
  };
  return (function* () {
    yield* marks.opaque;
    yield* marks.whiteouts;
    yield* entryLines(layer, undefined, light);
  })();
}

/**
 * The paths under `kept` whose lines in the shared bottom layers the difference of two
 * stacks can depend on (see keptDelta): `exact`, the paths the upper layers touch, their
 * parents, and the files their hardlinks name; `under`, the paths below which the bottom's
 * whole subtree counts (where an upper line removes or replaces what was there).
 */
class Relevant {
  private readonly exact = new Set<string>();
  private readonly under = new Set<string>();

  constructor(private readonly kept: string) {}

  /** An upper layer's line. */
  touched(l: IndexLine): void {
    if (!isUnder(l.p, this.kept)) return;
    this.add(l.p);
    if (l.t !== 'd' && l.t !== 'a') this.under.add(l.p);
    if (l.t === 'h' && isUnder(l.to, this.kept)) this.add(l.to);
  }

  /** Whether the lines at `p` (under kept) are relevant. */
  has(p: string): boolean {
    // From the top down: `exact` holds every parent of what is relevant (of `under`'s paths
    // too), so a parent not in it ends the walk (most lines of a bottom layer leave it within
    // a few names).
    for (let i = p.indexOf('/', this.kept.length); i !== -1; i = p.indexOf('/', i + 1)) {
      const q = p.slice(0, i);
      if (this.under.has(q)) return true;
      if (!this.exact.has(q)) return false;
    }
    return this.exact.has(p);
  }

  /** Takes in the target of every hardlink at a relevant path, until no more come in (a target may make another hardlink's path relevant). */
  closeOverHardlinks(links: readonly (readonly [string, string])[]): void {
    for (let grew = true; grew; ) {
      grew = false;
      for (const [p, to] of links) {
        if (!isUnder(to, this.kept) || !isUnder(p, this.kept) || this.has(to) || !this.has(p)) continue;
        this.add(to);
        grew = true;
      }
    }
  }

  /** `p` and its parents up to kept. */
  private add(p: string): void {
    for (let q = p; !this.exact.has(q); ) {
      this.exact.add(q);
      if (q === this.kept) break;
      const slash = q.lastIndexOf('/');
      if (slash === -1) break;
      q = q.slice(0, slash);
    }
  }
}
