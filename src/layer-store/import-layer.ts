import * as path from 'node:path';
import { createHash, type Hash } from 'node:crypto';
import { sha256Hex } from '../fs/core/hash.js';
import type { StorableLayer } from '../changeset.js';
import { StagedrootError } from '../errors.js';
import { tempNameIn } from '../fs/core/temp-names.js';
import { exists, listDir } from '../fs/core/host-paths.js';
import { syncFilesystem, writeJson } from '../fs/trees/durable.js';
import { LineWriter, mkdirUnsynced, newFileRule, renameUnsynced, StoreFile, type NewFileRule } from '../fs/trees/layer-store-io.js';
import type { XattrPolicy } from '../fs/core/xattr.js';
import { LayerChecker } from '../sources/layer/checker.js';
import { DEFAULT_LAYER_LIMITS, type LayerLimits } from '../sources/layer/entry-checks.js';
import { VerifiedStream } from '../sources/oci/digest.js';
import { compressionOf, decompress } from '../sources/tar/decompress.js';
import { readTarEntries } from '../sources/tar/reader.js';
import { encodeXattrs, type IndexLine } from './index-lines.js';
import { LAYER_RECORD_VERSION, SELINUX_CONFIG, objectKey, type LayerRecord, type LayerStore, type StoredLayer } from './store.js';

/** A layer blob to import, as a registry pull or an image layout has it (changeset.ts). */
export type LayerBlob = StorableLayer;

export interface ImportOptions {
  /** Caps against bombs; defaults in DEFAULT_LAYER_LIMITS. */
  limits?: Partial<LayerLimits>;
  /** An extended attribute the store's filesystem refuses: an error ('strict', the default) or dropped. */
  xattrPolicy?: XattrPolicy;
  /**
   * Leave the layer complete under tmp/NAME, not made durable and not renamed into diff/:
   * the store holds it as pending (LayerStore.addPending, found by find), and the caller
   * commits it (LayerStore.commitPending) after a syncfs of its own that covers what the
   * import wrote (a stage: its tree's sync, so the objects and the tree linked from them
   * are written back once). A crash before that commit leaves tmp/NAME, swept as any
   * import cut short.
   */
  deferCommit?: boolean;
}

export interface ImportResult {
  layer: StoredLayer;
  /** false: the layer was in the store already and its blob was not read. */
  imported: boolean;
}

/**
 * Imports a layer blob into the store, unless the store has it (by diff_id, else by the
 * compressed digest): then its blob is not read at all. One streamed pass: the blob is
 * hashed, decompressed (gzip, zstd or none, by content), read by the tar reader and every
 * entry checked by the layer checker as for a hostile archive (the first unsafe entry
 * rejects the layer, and nothing of it stays). Each regular file is written at most once,
 * as the object of its key when the store lacks it, and recorded in the layer's index by
 * key. An object is a file of the store's own directories (StoreFile: its host path as
 * it is, named by its key or the import's counter, never by the archive), not a write
 * through RootFs: the checker has already refused every unsafe name, and no archive name
 * reaches the store's disk; whiteouts and opaque markers are recorded as such.
 *
 * A file of up to 1 MiB (SMALL_FILE) is hashed before it is written, so it is written at
 * its object's name directly, or not at all when the store has that object; a larger one
 * goes to a temp object under tmp/NAME/o/ as it is hashed, renamed to its object's name
 * once its key is known. Memory: one chunk, one small file, and the checker's path sets
 * (as the two-pass apply holds).
 *
 * Crash-safe: the import's directory tmp/NAME is made durably before its first object,
 * and the objects it adds are not fsynced; the index is built under tmp/NAME; then one
 * syncfs makes the new objects (content and names) and the index durable, and the
 * layer's directory is renamed into diff/ last: the one step that makes the layer, and
 * so its objects, trusted. An object no complete layer names is never taken as stored
 * after a crash: a crash before that rename leaves tmp/NAME, and the next
 * LayerStore.prepare (every import's, every release's first step) removes it and every
 * object no layer names (possibly cut short or never written back), before any import
 * looks for an object. A failed import removes the objects it added, then its directory.
 */
export async function importLayer(store: LayerStore, blob: LayerBlob, o: ImportOptions = {}): Promise<ImportResult> {
  if (blob.digest === undefined && blob.diffId === undefined) {
    throw new StagedrootError('USAGE', `${blob.where}: a layer blob is imported by its digest, its diff_id or both; neither was given`);
  }
  const found = store.find(blob);
  if (found !== null) return { layer: blob.digest === undefined ? found : store.addDigest(found, blob.digest), imported: false };
  store.prepare();
  // Durable before the first object: from here until the layer is renamed into diff/, a
  // crash leaves this name under tmp/, and the next prepare() sweeps the objects no layer names.
  const tmp = tempNameIn(store.tmpDir);
  store.dfs.mkdir(tmp, 0o700);
  const created = new Map<string, string>();
  try {
    const unpacked = await unpack(store, tmp, blob, o, created);
    if (o.deferCommit) return { layer: store.addPending(writeRecord(store, tmp, unpacked, blob.digest), blob.digest === undefined ? [] : [blob.digest]), imported: true };
    const layer = await commit(store, tmp, unpacked, blob.digest);
    return { layer: blob.digest === undefined ? layer : store.addDigest(layer, blob.digest), imported: true };
  } catch (err) {
    // The objects this import made (not durable: no later import may take them as stored),
    // their removal made durable, then its directory; where that sync fails, the directory
    // stays for the next prepare(), which sweeps them again.
    for (const f of created.values()) store.dfs.unlink(f);
    if (created.size === 0 || (await syncFilesystem(store.dir).then(() => true, () => false))) store.dfs.removeTree(tmp);
    throw err;
  }
}

/** A file up to this size is read whole before it is written: its object key is known first, so it is written once, at its object's name, or not at all when the store has it. */
const SMALL_FILE = 1 << 20;

interface Unpacked {
  diffId: string;
  entries: number;
  files: number;
  bytes: number;
  /** Objects this import added (key -> its path under objects/). */
  created: Map<string, string>;
  /** The layer has a line at the SELinux policy's path (LayerRecord.selinuxConfig). */
  selinuxConfig: boolean;
}

async function unpack(store: LayerStore, tmp: string, blob: LayerBlob, o: ImportOptions, created: Map<string, string>): Promise<Unpacked> {
  const where = blob.where;
  const limits: LayerLimits = { ...DEFAULT_LAYER_LIMITS, ...o.limits };
  const raw = blob.digest === undefined ? null : new VerifiedStream(toBuffers(blob.open()), blob.digest, blob.size ?? null, where);
  const source = raw ?? toBuffers(blob.open());
  const { head, rest } = await peek(source, 8);
  const unc = new HashedStream(decompress(rest, compressionOf(head, where), where), blob.diffId ?? 'sha256:');
  const xattrPolicy = o.xattrPolicy ?? 'strict';
  store.dfs.mkdir(path.join(tmp, 'o'), 0o700);
  const index = new LineWriter(path.join(tmp, 'index.ndjson'), store.faults);
  const checker = new LayerChecker(limits, where);
  // objects/KK/: each made once (an EEXIST per object was a tenth of the import), with
  // what a new file there gets by itself (newFileRule: its owner and mode are then not set again).
  const made = new Set(listDir(store.objectsDir));
  const rules = new Map<string, NewFileRule | undefined>();
  const objectAt = (key: string): string => {
    const kk = key.slice(0, 2);
    if (!made.has(kk)) {
      mkdirUnsynced(path.join(store.objectsDir, kk), store.faults);
      made.add(kk);
    }
    return store.objectPath(key);
  };
  // Called after objectAt: its directory exists.
  const ruleAt = (key: string): NewFileRule | undefined => {
    const kk = key.slice(0, 2);
    if (!rules.has(kk)) rules.set(kk, newFileRule(path.join(store.objectsDir, kk)));
    return rules.get(kk);
  };
  let files = 0;
  let bytes = 0;
  let n = 0;
  let selinuxConfig = false;
  const put = (l: IndexLine): void => {
    if (l.p === SELINUX_CONFIG) selinuxConfig = true;
    index.line(JSON.stringify(l));
  };
  try {
    for await (const e of readTarEntries(unc, where, limits)) {
      let p;
      try {
        p = checker.check(e);
      } catch (err) {
        if (err instanceof StagedrootError) throw new StagedrootError(err.code, `${where} is rejected: ${err.message}`, { path: err.path ?? String(e.path), errno: err.errno, option: err.option, cause: err });
        throw err;
      }
      switch (p.kind) {
        case 'skip':
          break;
        case 'whiteout':
          put({ t: 'w', p: p.path });
          break;
        case 'opaque':
          put({ t: 'o', p: p.path });
          break;
        case 'dir':
          put({ t: 'd', p: p.path, m: p.mode, u: p.uid, g: p.gid, x: encodeXattrs(p.xattrs) });
          break;
        case 'symlink':
          put({ t: 'l', p: p.path, to: p.target, u: p.uid, g: p.gid, x: encodeXattrs(p.xattrs) });
          break;
        case 'hardlink':
          put({ t: 'h', p: p.path, to: p.target });
          break;
        case 'file': {
          // What a fresh apply's write gives the file (RootFs: mode 0644 unless the layer says).
          const attrs = { mode: p.mode ?? 0o644, uid: p.uid, gid: p.gid, mtime: p.mtime, xattrs: p.xattrs };
          // A small file is hashed once it is whole (one call: sha256Hex), a larger one as it streams.
          const h = p.size <= SMALL_FILE ? null : createHash('sha256');
          const xo = { rel: p.path, policy: xattrPolicy };
          // Up to SMALL_FILE (by its header's size): read into one buffer of its own as it is
          // hashed, then written at its object's name. Larger: written to a temp object under
          // tmp/o/ as it is hashed, then renamed to its object's name.
          const whole = p.size <= SMALL_FILE ? Buffer.allocUnsafe(p.size) : null;
          const big = whole === null ? new StoreFile(path.join(tmp, 'o', String(n++)), p.path, store.faults) : null;
          let size = 0;
          try {
            for await (const c of p.open()) {
              h?.update(c);
              if (big !== null) big.write(c);
              else if (size + c.length <= whole!.length) whole!.set(c, size);
              else throw new StagedrootError('SOURCE_CORRUPT', `${where} is rejected: ${p.path} has more content than its header's ${p.size} bytes`, { path: p.path });
              size += c.length;
            }
            if (size !== p.size) throw new StagedrootError('SOURCE_CORRUPT', `${where} is rejected: ${p.path} has ${size} bytes of content, not its header's ${p.size}`, { path: p.path });
            big?.finish(attrs, xo);
          } catch (err) {
            big?.abandon();
            throw err;
          }
          const sha = h === null ? sha256Hex(whole!) : h.digest('hex');
          const key = objectKey(sha, attrs);
          if (created.has(key)) big?.abandon();
          else if (big !== null) {
            const dst = objectAt(key);
            if (exists(dst)) big.abandon();
            else {
              renameUnsynced(big.host, dst, store.faults);
              created.set(key, dst);
            }
          } else {
            const dst = objectAt(key);
            const rule = ruleAt(key);
            const out = StoreFile.createNew(dst, p.path, store.faults, rule === undefined ? undefined : { attrs, rule });
            if (out !== null) {
              created.set(key, dst);
              try {
                out.write(whole!);
                out.finish(attrs, xo);
              } catch (err) {
                out.abandon();
                created.delete(key);
                throw err;
              }
            }
          }
          files += 1;
          bytes += size;
          put({ t: 'f', p: p.path, k: key, s: size, h: sha, m: attrs.mode, u: p.uid, g: p.gid, mt: p.mtime, x: encodeXattrs(p.xattrs), ...(p.xattrs?.some(([x]) => x === 'security.selinux') ? { l: 1 as const } : {}) });
          break;
        }
      }
    }
    // Each directory's final mode and mtime, deepest first (as layer/plan.ts applies them).
    const dirs = checker.dirsDeepestFirst();
    for (const [p, a] of dirs) put({ t: 'a', p, m: a.mode ?? 0o755, ...(a.mtime === undefined ? {} : { mt: a.mtime }) });
    index.close();
    // The rest of the tar (after its end-of-archive blocks) and of the blob is hashed too.
    const diffId = await unc.finish();
    if (blob.diffId !== undefined && diffId !== blob.diffId) {
      throw new StagedrootError('SOURCE_CORRUPT', `${where} does not match its digest ${blob.diffId} (its diff_id, of the uncompressed tar): that content hashes to ${diffId}`, { path: where, digest: blob.diffId });
    }
    await raw?.finish();
    return { diffId, entries: checker.entries, files, bytes, created, selinuxConfig };
  } catch (err) {
    index.abandon();
    // A blob that does not match its digest is the reason, whatever the tar reader tripped over
    // (an error that is itself a failed digest check, of the blob or its diff_id, carries the digest).
    if (raw !== null && err instanceof StagedrootError && err.digest === undefined) {
      await raw.finish().catch((e: unknown) => {
        if (e instanceof StagedrootError) throw e;
      });
    }
    throw err;
  } finally {
    await raw?.abandon();
  }
}

/** `digest`: the blob's compressed digest, in the record from the start (addDigest then writes its link alone, not the record a second time). */
async function commit(store: LayerStore, tmp: string, u: Unpacked, digest: string | undefined): Promise<StoredLayer> {
  writeRecord(store, tmp, u, digest);
  // 1. The new objects (content and names) and the index on disk, before the layer that names them.
  await syncFilesystem(store.dir);
  const dir = store.layerDir(u.diffId);
  store.dfs.mkdir(path.dirname(dir), 0o700);
  const already = store.byDiffId(u.diffId);
  if (already !== null) {
    store.dfs.removeTree(tmp);
    return already;
  }
  // 2. The layer, complete and durable, under its name: the one step that makes it trusted.
  store.dfs.rename(tmp, dir);
  return store.byDiffId(u.diffId)!;
}

/** The layer's record written in its import directory (its temp objects' directory gone): the layer there, complete, not yet durable. */
function writeRecord(store: LayerStore, tmp: string, u: Unpacked, digest: string | undefined): StoredLayer {
  const record: LayerRecord = { version: LAYER_RECORD_VERSION, diffId: u.diffId, digests: digest === undefined ? [] : [digest], entries: u.entries, files: u.files, bytes: u.bytes, newObjects: u.created.size, importedAt: new Date().toISOString(), selinuxConfig: u.selinuxConfig };
  store.dfs.removeTree(path.join(tmp, 'o'));
  writeJson(store.dfs, path.join(tmp, 'layer.json'), record);
  return { record, dir: tmp, index: path.join(tmp, 'index.ndjson') };
}

async function* toBuffers(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
  for await (const c of chunks) yield Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength);
}

/** The first `n` bytes of a stream (for its compression), and the whole stream again. */
async function peek(source: AsyncIterable<Buffer>, n: number): Promise<{ head: Buffer; rest: AsyncIterable<Buffer> }> {
  const it = source[Symbol.asyncIterator]();
  const got: Buffer[] = [];
  let len = 0;
  let done = false;
  while (len < n) {
    const r = await it.next();
    if (r.done) {
      done = true;
      break;
    }
    got.push(r.value);
    len += r.value.length;
  }
  const head = Buffer.concat(got).subarray(0, n);
  async function* rest(): AsyncGenerator<Buffer> {
    yield* got;
    if (done) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  }
  return { head, rest: rest() };
}

/**
 * A stream hashed as it is read (the uncompressed tar: its diff_id). The consumer may stop
 * early (at the end-of-archive blocks): `finish` reads the rest and returns the digest.
 */
class HashedStream implements AsyncIterable<Buffer> {
  private readonly it: AsyncIterator<Buffer>;
  private readonly hash: Hash;
  private readonly alg: string;

  constructor(source: AsyncIterable<Buffer>, digestLike: string) {
    this.alg = digestLike.slice(0, digestLike.indexOf(':'));
    this.it = source[Symbol.asyncIterator]();
    this.hash = createHash(this.alg);
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: async () => {
        const r = await this.it.next();
        if (!r.done) this.hash.update(r.value);
        return r;
      },
      return: async () => ({ done: true, value: undefined }),
    };
  }

  async finish(): Promise<string> {
    for (;;) {
      const r = await this.it.next();
      if (r.done) break;
      this.hash.update(r.value);
    }
    return `${this.alg}:${this.hash.digest('hex')}`;
  }
}
