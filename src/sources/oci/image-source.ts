import * as path from 'node:path';
import type { ChangeOp, ChangeSet, StorableLayer } from '../../changeset.js';
import { StagedrootError } from '../../errors.js';
import { exists, isDirectory } from '../../fs/core/host-paths.js';
import { bytesPayload, filePayload } from '../../trust/payload.js';
import { compressionOf, decompress } from '../tar/decompress.js';
import { DEFAULT_LAYER_LIMITS, type LayerLimits } from '../layer/entry-checks.js';
import type { LayerReader } from '../layer/entry.js';
import { planLayer } from '../layer/plan.js';
import type { Source, SourceInfo } from '../source.js';
import { readTarEntries } from '../tar/reader.js';
import { archiveStore, directoryStore, indexImageArchive, type BlobStore } from './blob-store.js';
import { VerifiedStream } from './digest.js';
import { VERSION_LABEL } from './media-types.js';
import { resolveDocker, resolveOci, type ImageLayer, type ImageOptions, type ResolvedImage } from './resolve.js';

export interface ImageSourceOptions extends ImageOptions {
  /** Caps against bombs, per layer; defaults in DEFAULT_LAYER_LIMITS. */
  limits?: Partial<LayerLimits>;
}

type Members = Awaited<ReturnType<typeof indexImageArchive>>;

/**
 * An OCI image (a layout directory, an oci-archive, or a `docker save` archive) as a
 * whole new root: its index and manifest are read and checked when the source is
 * inspected (the manifest for this platform or --ref; every descriptor's media type;
 * every blob present with its declared size), then each layer is planned in order with
 * the tar layer machinery (two streamed passes; whiteouts apply to the layers below),
 * every blob's digest checked while it streams. Nothing is written before every layer
 * passed its first pass.
 */
export function imageSource(p: string, o: ImageSourceOptions = {}, members?: Members): Source {
  const where = `image ${p}`;
  const dir = isDirectory(p);
  let resolving: Promise<ResolvedImage> | undefined;
  const resolve = (): Promise<ResolvedImage> =>
    (resolving ??= (async () => {
      let store: BlobStore;
      if (dir) store = directoryStore(p);
      else {
        const m = members ?? (await indexImageArchive(p));
        if (!m) throw new StagedrootError('SOURCE_UNSUPPORTED', `${p} is not an image archive (no index.json and oci-layout, no manifest.json)`, { path: p });
        store = archiveStore(p, m);
      }
      return store.size('index.json') !== null && store.size('oci-layout') !== null ? resolveOci(store, o) : resolveDocker(store, o);
    })());
  const limits = { ...DEFAULT_LAYER_LIMITS, ...o.limits };
  return {
    kind: 'image',
    describe: where,
    async inspect(): Promise<SourceInfo> {
      const img = await resolve();
      const label = img.labels[VERSION_LABEL];
      // A layout directory is signed through its manifest (DIR.minisig beside it); an archive as a file.
      const signed = dir
        ? { payload: bytesPayload(img.manifest!, `the manifest ${img.digest} of ${where}`), defaultSignature: `${p.replace(/\/+$/, '')}.minisig` }
        : { payload: filePayload(p, where), defaultSignature: `${p}.minisig` };
      return {
        signed,
        origin: { kind: 'oci-image', digest: img.digest, mediaType: img.mediaType, labels: img.labels, ...(img.ref ? { ref: img.ref } : {}), ...(img.platform ? { platform: img.platform } : {}) },
        ...(label ? { label } : {}),
        diffIds: img.diffIds,
      };
    },
    async plan(_base, context): Promise<ChangeSet> {
      const img = await resolve();
      const description = `${where} (${img.digest}${img.platform ? `, ${img.platform}` : ''}): ${img.layers.length} layer${img.layers.length === 1 ? '' : 's'}`;
      if (context?.layerStore !== undefined) {
        // The stage's layer store reads each layer it lacks once; the tree is built from it.
        const stacked = await context.layerStore.stack(img.layers.map((layer) => storable(img.store, layer, `${where}: ${layer.what}`)), { limits });
        return { description, ops: stacked.ops, count: stacked.count, ...(img.labels[VERSION_LABEL] ? { label: img.labels[VERSION_LABEL] } : {}) };
      }
      const sets: ChangeSet[] = [];
      for (const layer of img.layers) sets.push(await planLayer(layerReader(img.store, layer, `${where}: ${layer.what}`, limits), { limits }));
      return {
        description,
        ops: chain(sets),
        count: 1 + sets.reduce((n, s) => n + (s.count ?? 0), 0),
        ...(img.labels[VERSION_LABEL] ? { label: img.labels[VERSION_LABEL] } : {}),
      };
    },
  };
}

/** The image replaces the whole tree, then its layers apply in order. */
async function* chain(sets: ChangeSet[]): AsyncGenerator<ChangeOp> {
  yield { op: 'clear', path: '' };
  for (const s of sets) yield* s.ops as AsyncIterable<ChangeOp>;
}

/**
 * A layer as the layer store imports it: by the digest of the blob as stored (OCI), or
 * (a docker archive) by its diff_id, the digest of the uncompressed tar.
 */
function storable(store: BlobStore, layer: ImageLayer, where: string): StorableLayer {
  return {
    ...(layer.of === 'blob' ? { digest: layer.digest } : { diffId: layer.digest }),
    size: layer.size,
    where,
    async *open() {
      const f = store.open(layer.name);
      try {
        yield* f.chunks();
        f.assertUnchanged();
      } finally {
        f.close();
      }
    },
  };
}

function layerReader(store: BlobStore, layer: ImageLayer, where: string, limits: LayerLimits): LayerReader {
  const blob = `${store.describe}: ${layer.what}`;
  return {
    where,
    async *entries() {
      const f = store.open(layer.name);
      // The digest is of the blob as stored (OCI), or of the uncompressed tar (a docker archive's diff id).
      const raw = layer.of === 'blob' ? new VerifiedStream(f.chunks(), layer.digest, layer.size, blob) : null;
      let unc: VerifiedStream | null = null;
      try {
        let tar: AsyncIterable<Buffer> = decompress(raw ?? f.chunks(), compressionOf(f.head(8), where), where);
        if (raw === null) tar = unc = new VerifiedStream(tar, layer.digest, null, blob);
        yield* readTarEntries(tar, where, limits);
        await (raw ?? unc)!.finish(); // the rest of the blob (after the end-of-archive blocks) is hashed too
        f.assertUnchanged();
      } catch (err) {
        // A blob that does not match its digest is the reason, whatever the tar reader tripped over
        // (an error that is itself this blob's failed digest or size check carries its digest).
        if (raw !== null && err instanceof StagedrootError && err.digest !== layer.digest) {
          await raw.finish().catch((e: unknown) => {
            if (e instanceof StagedrootError) throw e;
          });
        }
        throw err;
      } finally {
        await (raw ?? unc)?.abandon();
        f.close();
      }
    },
  };
}

/** Whether a directory is an OCI image layout (oci-layout and index.json). */
export function isImageLayout(p: string): boolean {
  return exists(path.join(p, 'oci-layout')) && exists(path.join(p, 'index.json'));
}
