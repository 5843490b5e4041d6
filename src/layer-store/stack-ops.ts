import type { ChangeOp } from '../changeset.js';
import { StagedrootError } from '../errors.js';
import { SourceFile } from '../fs/core/file-chunks.js';
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
export function* stackOps(store: LayerStore, layers: readonly StoredLayer[], o: { onto?: number } = {}): Generator<ChangeOp> {
  // onto: the tree already holds the first `onto` layers applied (a copy of a deployment
  // of them): only the layers above are applied, and nothing is cleared.
  const onto = o.onto ?? 0;
  if (onto === 0) yield { op: 'clear', path: '' };
  for (const layer of layers.slice(onto)) {
    for (const l of layerLines(layer)) {
      switch (l.t) {
        case 'd':
          yield { op: 'mkdir', path: l.p, mode: (l.m ?? 0o755) | 0o700, uid: l.u, gid: l.g, replace: true, xattrs: decodeXattrs(l.x) };
          break;
        case 'f': {
          const file = store.objectPath(l.k);
          yield { op: 'write', path: l.p, content: { kind: 'stream', size: l.s, open: () => objectChunks(file), linkFrom: { file, sha256: l.h } }, mode: l.m, uid: l.u, gid: l.g, mtime: l.mt, replace: true, xattrs: decodeXattrs(l.x) };
          break;
        }
        case 'l':
          yield { op: 'symlink', path: l.p, target: l.to, uid: l.u, gid: l.g, replace: true, xattrs: decodeXattrs(l.x) };
          break;
        case 'h':
          yield { op: 'hardlink', path: l.p, target: l.to, replace: true };
          break;
        case 'a':
          yield { op: 'setattr', path: l.p, mode: l.m, mtime: l.mt };
          break;
        case 'o':
          yield { op: 'clear', path: l.p };
          break;
        case 'w':
          yield { op: 'remove', path: l.p, recursive: true, missingOk: true };
          break;
      }
    }
  }
}

/**
 * A stored layer's index lines in the order a fresh apply takes them: its opaque
 * directories, then its whiteouts (both hide what the layers below made), then its
 * entries in archive order. The index is read twice, the first time keeping only those
 * few lines: memory grows with the whiteouts, never with the layer.
 */
export function* layerLines(layer: StoredLayer): Generator<IndexLine> {
  const opaque: IndexLine[] = [];
  const whiteouts: IndexLine[] = [];
  for (const l of parsed(layer.index)) {
    if (l.t === 'o') opaque.push(l);
    else if (l.t === 'w') whiteouts.push(l);
  }
  yield* opaque;
  yield* whiteouts;
  for (const l of parsed(layer.index)) if (l.t !== 'o' && l.t !== 'w') yield l;
}

/** How many ops stackOps yields (for progress): one per index line, and the clear. */
export function countStackOps(layers: readonly StoredLayer[], o: { onto?: number } = {}): number {
  const onto = o.onto ?? 0;
  return (onto === 0 ? 1 : 0) + layers.slice(onto).reduce((n, l) => n + l.record.entries, 0);
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

/** Whether some layer of the stack has an entry at `p` (its own line; a higher whiteout not looked at). */
export function stackHasPath(layers: readonly StoredLayer[], p: string): boolean {
  const needle = `"p":${JSON.stringify(p)}`;
  return layers.some((l) => {
    for (const line of readLines(l.index)) if (line.includes(needle) && parseIndexLine(line, l.index).p === p) return true;
    return false;
  });
}

async function* objectChunks(file: string): AsyncGenerator<Buffer> {
  const f = SourceFile.open(file);
  try {
    yield* f.chunks();
  } finally {
    f.close();
  }
}

function* parsed(file: string): Generator<IndexLine> {
  for (const line of readLines(file)) if (line !== '') yield parseIndexLine(line, file);
}
