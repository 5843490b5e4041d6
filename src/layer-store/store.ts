import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { sha256Hex } from '../fs/core/hash.js';
import { z } from 'zod';
import { StagedrootError } from '../errors.js';
import { noFaults, type FaultHook } from '../fs/core/faults.js';
import { isTempName } from '../fs/core/temp-names.js';
import type { XattrList } from '../fs/core/xattr.js';
import { exists, listDir, readLink } from '../fs/core/host-paths.js';
import { DurableFs, readJsonState, writeJson } from '../fs/trees/durable.js';
import { readLines } from '../fs/trees/layer-store-io.js';
import { parseIndexLine } from './index-lines.js';
import { checkDigest } from '../util/digest-form.js';

/**
 * The layer store: every image layer a sysroot has staged, unpacked once and shared by
 * every deployment built from it (`SYSROOT/layers/`, the directory the caller names):
 *
 *   objects/KK/REST          a regular file of some layer, named by its object key (objectKey):
 *                            content, mode, owner, mtime and extended attributes, which is
 *                            everything a hardlink shares, so that any tree may link it
 *   diff/ALG/HEX/            a layer, by its diff_id (the digest of the uncompressed tar):
 *     layer.json             its record (LayerRecord)
 *     index.ndjson           its entries, in archive order (index-lines.ts)
 *   blob/ALG/HEX             a compressed digest that maps to a layer: a symlink to its diff/ dir
 *   tmp/                     imports under way (a temp name each); any there at the next
 *                            import are leftovers of a crash and removed, never read
 *
 * A layer directory exists only complete: an import builds it under tmp/, makes
 * everything durable, and renames it into diff/ last (import-layer.ts). An import writes
 * its new objects into objects/ unsynced, while its tmp/ name exists (made durably
 * first); they are durable before its layer is renamed into diff/. So an object some
 * layer names is durable, and one no layer names may be a crash's unfinished write: the
 * first prepare() after a crash (a tmp/ name left) removes every object no layer names
 * before anything looks for an object.
 */
export const LAYER_RECORD_VERSION = 1;

const recordSchema = z.object({
  version: z.literal(LAYER_RECORD_VERSION),
  diffId: z.string(),
  /** Compressed digests seen for this layer (a registry's and a local layout's may differ). */
  digests: z.array(z.string()),
  entries: z.number().int().nonnegative(),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  /** Objects this import added (the others were in the store already). */
  newObjects: z.number().int().nonnegative(),
  importedAt: z.string(),
  /**
   * Whether the layer has a line (an entry, or a whiteout) at SELINUX_CONFIG, so that a
   * stage knows whether the stack carries an SELinux policy without reading its index.
   * Absent in a record written before it was kept: read from the index once, then recorded.
   */
  selinuxConfig: z.boolean().optional(),
});
export type LayerRecord = z.infer<typeof recordSchema>;

/** The file whose presence makes a tree label what a stage writes (fs/trees/selinux.ts's treePolicy). */
export const SELINUX_CONFIG = 'etc/selinux/config';

/** A layer in the store. */
export interface StoredLayer {
  record: LayerRecord;
  /** Its directory (diff/ALG/HEX) and index. */
  dir: string;
  index: string;
}

/** How a blob names the layer it holds: its compressed digest, its diff_id, or both. */
export interface LayerRef {
  digest?: string;
  diffId?: string;
}

/** What an object's key covers besides its content: what every hardlink of it shares. */
export interface ObjectAttrs {
  mode: number;
  uid?: number;
  gid?: number;
  mtime?: number;
  xattrs?: XattrList;
}

/**
 * The object key of a regular file: sha256 over its content's sha256 and every attribute
 * a hardlink shares (mode, owner, mtime, extended attributes sorted by name, SELinux label
 * included), as ostree's file objects are keyed on content and metadata. Two entries with
 * the same key are the same inode in every tree linked from the store.
 */
export function objectKey(contentSha256: string, a: ObjectAttrs): string {
  const head = `stagedroot-object-1\0${contentSha256}\0${a.mode}\0${a.uid ?? ''}\0${a.gid ?? ''}\0${a.mtime ?? ''}\0`;
  // No attributes (most files): the same bytes hashed in one call.
  if (a.xattrs === undefined || a.xattrs.length === 0) return sha256Hex(head);
  const h = createHash('sha256');
  h.update(head);
  const xs = [...(a.xattrs ?? [])].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  for (const [n, v] of xs) h.update(`${n}\0${v.length}\0`).update(v);
  return h.digest('hex');
}

/** ALG/HEX of a digest ("sha256:ab…" → "sha256/ab…"), checked. */
function digestPath(d: string, what: string): string {
  const [alg, hex] = checkDigest(d, what, 'the layer store').split(':');
  return `${alg}/${hex}`;
}

/** A layer imported with its commit deferred (importLayer's deferCommit): complete under tmp/NAME, not yet durable, not yet in diff/. */
interface PendingLayer {
  layer: StoredLayer;
  /** Compressed digests to link once it is committed. */
  digests: string[];
}

export class LayerStore {
  readonly dfs: DurableFs;
  /**
   * The layers this store object imported with their commit deferred, by diff_id (see
   * importLayer's deferCommit and commitPending): found by find and byDiffId as stored
   * layers (at their temp directory), and never taken for a crash's leftovers by prepare.
   */
  private readonly pending = new Map<string, PendingLayer>();

  constructor(readonly dir: string, readonly faults: FaultHook = noFaults) {
    this.dfs = new DurableFs(faults);
  }

  get objectsDir(): string {
    return path.join(this.dir, 'objects');
  }
  get tmpDir(): string {
    return path.join(this.dir, 'tmp');
  }
  objectPath(key: string): string {
    return path.join(this.dir, 'objects', key.slice(0, 2), key.slice(2));
  }
  layerDir(diffId: string): string {
    return path.join(this.dir, 'diff', digestPath(diffId, 'the diff_id'));
  }
  blobLink(digest: string): string {
    return path.join(this.dir, 'blob', digestPath(digest, 'the layer digest'));
  }

  /** Makes the store's directories (durably), then removes what a crash left (removeLeftovers). */
  prepare(): string[] {
    this.dfs.mkdir(this.dir, 0o700);
    for (const d of ['objects', 'diff', 'blob', 'tmp']) this.dfs.mkdir(path.join(this.dir, d), 0o700);
    return this.removeLeftovers();
  }

  /**
   * Removes what a crash left: an import or a release cut short (a name under tmp/). The
   * objects no layer names go first (an import cut short may have left some not written
   * back, which no later import may take as stored), then the leftovers themselves, so
   * that a crash during this leaves them to the next. Returns the leftovers removed.
   */
  removeLeftovers(): string[] {
    const mine = new Set([...this.pending.values()].map((p) => path.basename(p.layer.dir)));
    const left = listDir(this.tmpDir).filter((n) => isTempName(n) && !mine.has(n));
    if (left.length === 0) return left;
    this.sweepObjects([...this.layers(), ...[...this.pending.values()].map((p) => p.layer)]);
    for (const n of left) this.dfs.removeTree(path.join(this.tmpDir, n));
    return left;
  }

  /** Removes every object none of `keep` names (a mark-sweep; memory: their object keys). Returns how many went. */
  sweepObjects(keep: readonly StoredLayer[]): number {
    const marked = new Set<string>();
    for (const l of keep) {
      for (const line of readLines(l.index)) {
        if (line === '') continue;
        const e = parseIndexLine(line, l.index);
        if (e.t === 'f') marked.add(e.k);
      }
    }
    let removed = 0;
    for (const kk of listDir(this.objectsDir)) {
      for (const rest of listDir(path.join(this.objectsDir, kk))) {
        if (marked.has(kk + rest)) continue;
        this.dfs.unlink(path.join(this.objectsDir, kk, rest));
        removed += 1;
      }
    }
    return removed;
  }

  /** The layer with this diff_id, or null (a layer directory exists only complete). */
  byDiffId(diffId: string): StoredLayer | null {
    const waiting = this.pending.get(diffId);
    if (waiting !== undefined) return waiting.layer;
    return this.recordAt(this.layerDir(diffId), diffId);
  }

  /** The layer whose directory is `dir` (its record of `diffId`), or null when it has no record. */
  private recordAt(dir: string, diffId: string): StoredLayer | null {
    const record = readJsonState(path.join(dir, 'layer.json'), recordSchema, 'layer record');
    if (record === null) return null;
    if (record.diffId !== diffId) throw new StagedrootError('STATE_CORRUPT', `The layer record ${dir}/layer.json is of ${record.diffId}, not ${diffId}`, { path: dir });
    return { record, dir, index: path.join(dir, 'index.ndjson') };
  }

  /** The layer a blob holds: by diff_id when it is known, else by the compressed digest's link. */
  find(ref: LayerRef): StoredLayer | null {
    if (ref.diffId !== undefined) return this.byDiffId(ref.diffId);
    if (ref.digest === undefined) return null;
    for (const p of this.pending.values()) if (p.digests.includes(ref.digest)) return p.layer;
    const to = readLink(this.blobLink(ref.digest));
    if (to === null) return null;
    const [alg, hex] = to.split('/').slice(-2);
    return alg !== undefined && hex !== undefined ? this.byDiffId(`${alg}:${hex}`) : null;
  }

  /** Records that `digest` (a compressed blob) holds `layer`: its blob/ link and its record's list. */
  addDigest(layer: StoredLayer, digest: string): StoredLayer {
    const waiting = this.pending.get(layer.record.diffId);
    if (waiting !== undefined) {
      // Linked once the layer is committed (commitPending).
      if (!waiting.digests.includes(digest)) waiting.digests.push(digest);
      return waiting.layer;
    }
    const link = this.blobLink(digest);
    this.dfs.mkdir(path.dirname(link), 0o700);
    const target = path.relative(path.dirname(link), layer.dir);
    if (readLink(link) !== target) this.dfs.replaceSymlink(link, target);
    if (layer.record.digests.includes(digest)) return layer;
    const record = { ...layer.record, digests: [...layer.record.digests, digest] };
    writeJson(this.dfs, path.join(layer.dir, 'layer.json'), record);
    return { ...layer, record };
  }

  /**
   * Whether the layer has a line at SELINUX_CONFIG: its record's flag, or (a record from
   * before the flag) its index read once and the flag recorded.
   */
  hasSelinuxConfig(layer: StoredLayer): boolean {
    if (layer.record.selinuxConfig !== undefined) return layer.record.selinuxConfig;
    const has = layerHasPath(layer, SELINUX_CONFIG);
    writeJson(this.dfs, path.join(layer.dir, 'layer.json'), { ...layer.record, selinuxConfig: has });
    return has;
  }

  /**
   * Takes a layer an import left complete under tmp/NAME with its commit deferred
   * (importLayer's deferCommit): its objects and index written, not yet made durable.
   * Until commitPending it is found as a stored layer at that directory (the caller's
   * stage builds its tree from it), and prepare leaves it and its objects alone.
   */
  addPending(layer: StoredLayer, digests: readonly string[]): StoredLayer {
    this.pending.set(layer.record.diffId, { layer, digests: [...digests] });
    return layer;
  }

  /** The pending layers' diff_ids and directories (a worker's store object takes them with adoptPending). */
  pendingDirs(): [string, string][] {
    return [...this.pending].map(([d, p]) => [d, p.layer.dir]);
  }

  /** Another store object's pending layers (pendingDirs), found here as they are there: read only (a worker's models). */
  adoptPending(dirs: readonly (readonly [string, string])[]): this {
    for (const [diffId, dir] of dirs) {
      const layer = this.recordAt(dir, diffId);
      if (layer === null) throw new StagedrootError('STATE_CORRUPT', `The layer ${diffId} being imported has no record in ${dir}`, { path: dir });
      this.pending.set(diffId, { layer, digests: [] });
    }
    return this;
  }

  get hasPending(): boolean {
    return this.pending.size > 0;
  }

  /**
   * Commits the pending layers: each renamed from tmp/ into diff/ (durably), the one step
   * that makes it trusted, then its compressed digests linked. The caller has made
   * everything the imports wrote durable since (a syncfs of the store's filesystem:
   * the stage's tree sync), as an import's own commit does before its rename.
   */
  commitPending(): void {
    for (const [diffId, p] of [...this.pending]) {
      const dir = this.layerDir(diffId);
      this.dfs.mkdir(path.dirname(dir), 0o700);
      this.pending.delete(diffId);
      // Another import of the same layer committed first: that one stands.
      if (this.recordAt(dir, diffId) !== null) this.dfs.removeTree(p.layer.dir);
      else this.dfs.rename(p.layer.dir, dir);
      let layer = this.byDiffId(diffId)!;
      for (const d of p.digests) layer = this.addDigest(layer, d);
    }
  }

  /** Every layer in the store, by diff_id. */
  layers(): StoredLayer[] {
    const out: StoredLayer[] = [];
    const diff = path.join(this.dir, 'diff');
    for (const alg of listDir(diff)) {
      for (const hex of listDir(path.join(diff, alg))) {
        const l = this.byDiffId(`${alg}:${hex}`);
        if (l !== null) out.push(l);
      }
    }
    return out;
  }

  hasObject(key: string): boolean {
    return exists(this.objectPath(key));
  }
}

/** Whether the layer's index has a line at `p` (its own line; whatever another layer does there not looked at). */
export function layerHasPath(layer: StoredLayer, p: string): boolean {
  const needle = `"p":${JSON.stringify(p)}`;
  for (const line of readLines(layer.index)) if (line.includes(needle) && parseIndexLine(line, layer.index).p === p) return true;
  return false;
}

export { recordSchema as layerRecordSchema };
