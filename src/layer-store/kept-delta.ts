import { isUnder } from '../fs/core/paths.js';
import type { IndexLine } from './index-lines.js';
import { keptApart, layerLines } from './stack-ops.js';
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

/**
 * How a tree of the stack `next` is made from one of `base` by keeping the base's `kept`
 * part (usr/) and changing only what differs there, whatever layer changed: both stacks
 * apart (keptApart) with no hardlink between `kept` and the rest, the `kept` part of each
 * modelled from the indexes (the layers they share at the bottom modelled once), and the
 * difference returned as index lines. The rest of the tree is the new stack's other lines
 * applied in order. Null where the model cannot say (the stage builds the tree whole).
 */
export function keptDelta(base: readonly StoredLayer[], next: readonly StoredLayer[], kept: string, shared: readonly string[] = []): KeptDelta | null {
  // Each layer's index read and parsed once (in apply order), whatever the passes over it.
  const parsed = new Map<string, IndexLine[]>();
  const linesOf: LinesOf = (layer) => {
    let ls = parsed.get(layer.record.diffId);
    if (ls === undefined) parsed.set(layer.record.diffId, (ls = [...layerLines(layer)]));
    return ls;
  };
  if (crosses(base, kept, linesOf) || crosses(next, kept, linesOf)) return null;
  const nextApart = keptApart(next, kept, shared, linesOf);
  if (!nextApart.apart || !keptApart(base, kept, shared, linesOf).apart) return null;
  let common = 0;
  while (common < base.length && common < next.length && base[common]!.record.diffId === next[common]!.record.diffId) common += 1;
  const bottom = new Model(kept);
  if (!simulate(bottom, base.slice(0, common), linesOf)) return null;
  const from = bottom.clone();
  if (!simulate(from, base.slice(common), linesOf)) return null;
  const to = bottom;
  if (!simulate(to, next.slice(common), linesOf)) return null;
  const outside = nextApart.outside;
  return { lines: diff(from, to), outside };
}

/** Whether a hardlink of the stack joins `kept` and the rest. */
function crosses(layers: readonly StoredLayer[], kept: string, linesOf: LinesOf): boolean {
  for (const layer of layers) for (const l of linesOf(layer)) if (l.t === 'h' && isUnder(l.p, kept) !== isUnder(l.to, kept)) return true;
  return false;
}
