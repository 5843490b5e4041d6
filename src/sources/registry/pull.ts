import * as path from 'node:path';
import { DurableFs } from '../../fs/trees/durable.js';
import { fileSize, PartialFile } from '../../fs/trees/fetch-file.js';
import { blobPath } from '../oci/digest.js';
import { REF_ANNOTATION } from '../oci/media-types.js';
import { RegistryClient, type BlobFetch, type RegistryClientOptions } from './client.js';
import { formatReference, type ImageReference } from './reference.js';

export interface PullOptions extends RegistryClientOptions {
  /** Layers fetched at once (default 3). */
  parallel?: number;
  /** Told when each blob is in place. */
  onBlob?: (e: { digest: string; what: string; size: number } & BlobFetch) => void;
}

export interface PulledImage {
  /** The OCI layout the image is in. */
  dir: string;
  /** The image manifest's digest (for the platform, when the reference named an index). */
  digest: string;
  mediaType: string;
  /** The digest the reference resolved to (its own digest, or its tag's at the time): the index's when it named one. */
  resolvedDigest: string;
  /** The reference by digest: what a later pull of the same image asks for. */
  pullspec: string;
  /** The origin that served it ("https://127.0.0.1:5000"). */
  registry: string;
  platform?: string;
  /** Which credentials file was used (never its content). */
  credentials: string;
  fetched: number;
  cached: number;
}

/**
 * Pulls an image into `dir` as an OCI image layout: its manifest (and the index it was
 * picked from), config and layers as blobs (each verified as it arrives; see
 * RegistryClient.fetchBlob), then `oci-layout` and an `index.json` naming the manifest,
 * so that the image is read as any local layout (src/sources/oci/). A blob already
 * whole in `dir` is not fetched again; what an interrupted pull left is resumed.
 */
export async function pullImage(ref: ImageReference, dir: string, o: PullOptions = {}): Promise<PulledImage> {
  const client = new RegistryClient(ref, o);
  const r = await client.resolve();
  const dfs = new DurableFs();
  let fetched = 0;
  let cached = 0;
  const note = (d: { digest: string; size: number }, what: string, f: BlobFetch) => {
    fetched += f.fetched;
    cached += f.cached;
    o.onBlob?.({ digest: d.digest, what, size: d.size, ...f });
  };
  // The documents as they came (their digests checked), written as blobs.
  for (const m of [...(r.index ? [r.index] : []), r.manifest]) {
    const dest = path.join(dir, blobPath(m.digest));
    if ((await fileSize(dest)) === m.bytes.length) continue;
    const part = await PartialFile.open(dest);
    try {
      await part.truncate();
      await part.append(m.bytes);
      await part.commit(dest);
    } finally {
      await part.close();
    }
  }
  note(r.config, 'the config', await client.fetchBlob(r.config, path.join(dir, blobPath(r.config.digest)), 'the config'));
  const queue = r.layers.map((l, i) => ({ l, what: `layer ${i + 1} of ${r.layers.length}` }));
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      note(next.l, next.what, await client.fetchBlob(next.l, path.join(dir, blobPath(next.l.digest)), next.what));
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(o.parallel ?? 3, queue.length)) }, worker));
  const name = ref.tag ?? formatReference(ref);
  dfs.writeFileAtomic(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }) + '\n');
  dfs.writeFileAtomic(
    path.join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [{ mediaType: r.manifest.mediaType, digest: r.manifest.digest, size: r.manifest.bytes.length, annotations: { [REF_ANNOTATION]: name } }],
    }) + '\n',
  );
  const resolvedDigest = (r.index ?? r.manifest).digest;
  return {
    dir,
    digest: r.manifest.digest,
    mediaType: r.manifest.mediaType,
    resolvedDigest,
    pullspec: formatReference({ ...ref, tag: undefined, digest: resolvedDigest }),
    registry: client.origin,
    ...(r.platform ? { platform: r.platform } : {}),
    credentials: client.credentialsUsed,
    fetched,
    cached,
  };
}
