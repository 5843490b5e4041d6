import * as path from 'node:path';
import { StagedrootError } from '../../errors.js';
import { freeSpace } from '../../fs/core/host-paths.js';
import { withFileLock } from '../../fs/lock/file-lock.js';
import { DurableFs } from '../../fs/trees/durable.js';
import { fileSize, PartialFile, readSmallFile } from '../../fs/trees/fetch-file.js';
import { blobPath, digestOf } from '../oci/digest.js';
import { REF_ANNOTATION } from '../oci/media-types.js';
import { MAX_JSON_BYTES } from '../oci/read-blob.js';
import { RegistryClient, type BlobFetch, type BlobProgress, type RegistryClientOptions, type ResolvedManifest } from './client.js';
import { formatReference, type ImageReference } from './reference.js';
import { loadPolicy, type Policy } from './policy.js';
import { enforcePolicy, type PolicyVerdict } from './enforce-policy.js';
import { endpointsFor, loadRegistriesConf, type Endpoint, type RegistriesConf } from './registries-conf.js';

export interface PullOptions extends RegistryClientOptions {
  /** Layers fetched at once (default 3). */
  parallel?: number;
  /** Bytes that must stay free on the blob directory's filesystem after the layers are fetched (default 0). */
  reserveBytes?: number;
  /** Told as a layer's bytes arrive (every MiB): bytes in place, its size, fetched now, kept from an earlier fetch. */
  onProgress?: (e: { digest: string; what: string } & BlobProgress) => void;
  /** Told when each blob is in place. */
  onBlob?: (e: { digest: string; what: string; size: number } & BlobFetch) => void;
  /**
   * registries.conf: a file to read alone (`--registries-conf`), one already read, or
   * null for none; default /etc/containers/registries.conf and its drop-ins.
   */
  registriesConf?: string | RegistriesConf | null;
  /** containers-policy.json: a file (`--policy`), one already read, or null for none; default /etc/containers/policy.json when it exists. */
  policy?: string | Policy | null;
  /** Where registries.d's YAML files say each registry's signatures are (default /etc/containers/registries.d). */
  registriesD?: string;
  /**
   * Where a `signedBy` requirement reads the signatures when no registries.d scope names a
   * lookaside for the image (a directory; default containers/image's built-in one,
   * builtinLookasideDir: /var/lib/containers/sigstore for root).
   */
  defaultLookasideDir?: string;
  /** Told when a mirror could not serve the image and the next endpoint is tried. */
  onMirrorFailed?: (e: { mirror: string; error: StagedrootError }) => void;
  /** Seconds to wait for another pull writing the same blob of the directory, or its index.json (default 3600). */
  lockWaitSeconds?: number;
}

/**
 * A blob of the directory written under its lock (fs/lock/file-lock.ts), so that two
 * pulls into one directory at once (two stages sharing a --blob-dir) never write the
 * same `DEST.partial` together: the second waits, then finds the blob whole.
 */
function underLock<T>(dest: string, what: string, o: PullOptions, fn: () => Promise<T>): Promise<T> {
  return withFileLock(dest, `${what} (${dest}), being written by another pull,`, o.lockWaitSeconds ?? 3600, fn);
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
  /** The mirror (registries.conf) that served it, as HOST/REPO, when one did. */
  mirror?: string;
  platform?: string;
  /** Which credentials file was used (never its content). */
  credentials: string;
  fetched: number;
  cached: number;
}

/** An image resolved and its documents in place: the manifest (and index) and the config, not yet the layers. */
export interface ResolvedPull {
  /** The image asked for (its name, not the mirror's). */
  ref: ImageReference;
  /** The client of the endpoint that served the manifest: the layers come from it too. */
  client: RegistryClient;
  /** That endpoint, when it is a mirror: HOST/REPO. */
  mirror?: string;
  /** What the signature policy said (none when there is no policy file). */
  verdict?: PolicyVerdict;
  resolved: ResolvedManifest;
  dir: string;
  /** The config blob, verified (a small document). */
  config: Buffer;
  fetched: number;
  cached: number;
}

/**
 * The first half of a pull: the reference resolved once (an index to the platform's
 * manifest), the documents written as blobs of `dir` and the config fetched: what an
 * image is (its digest, labels, platform) is known before any layer is fetched.
 */
export async function resolvePull(ref: ImageReference, dir: string, o: PullOptions = {}): Promise<ResolvedPull> {
  const c = o.registriesConf;
  const conf = c === null ? null : typeof c === 'object' ? c : await loadRegistriesConf(c === undefined ? {} : { file: c });
  const endpoints = endpointsFor(conf, ref);
  const failed: string[] = [];
  for (const [i, ep] of endpoints.entries()) {
    const last = i === endpoints.length - 1;
    let rp: ResolvedPull;
    try {
      rp = await resolveAt(ref, ep, dir, o);
    } catch (err) {
      if (!(err instanceof StagedrootError)) throw err;
      if (last) {
        if (failed.length === 0) throw err;
        throw new StagedrootError(err.code, `${err.message} (${failed.join('; ')})`, { ...(err.path !== undefined ? { path: err.path } : {}), cause: err });
      }
      // A mirror that fails falls through to the next, then to the source (as containers/image).
      failed.push(`the mirror ${formatReference(ep.ref)} failed first: ${err.message}`);
      o.onMirrorFailed?.({ mirror: formatReference(ep.ref), error: err });
      continue;
    }
    // The policy judges what the reference resolved to (the index, when it named one), before any layer is fetched.
    const p = o.policy;
    const policy = p === null ? null : typeof p === 'object' ? p : await loadPolicy(p);
    if (policy !== null) rp.verdict = await enforcePolicy(policy, ref, (rp.resolved.index ?? rp.resolved.manifest).digest, rp.client, { ...(o.registriesD !== undefined ? { registriesD: o.registriesD } : {}), ...(o.defaultLookasideDir !== undefined ? { defaultLookasideDir: o.defaultLookasideDir } : {}) });
    return rp;
  }
  throw new Error('unreachable: endpointsFor always ends with the source');
}

/** resolvePull at one endpoint. A mirror gets no retries of its own: the next endpoint is its retry. */
async function resolveAt(ref: ImageReference, ep: Endpoint, dir: string, o: PullOptions): Promise<ResolvedPull> {
  const client = new RegistryClient(ep.ref, { ...o, ...(ep.insecure ? { insecure: true } : {}), ...(ep.mirror ? { retries: 0 } : {}) });
  const r = await client.resolve();
  // The documents as they came (their digests checked), written as blobs.
  for (const m of [...(r.index ? [r.index] : []), r.manifest]) {
    const dest = path.join(dir, blobPath(m.digest));
    if ((await fileSize(dest)) === m.bytes.length) continue;
    await underLock(dest, `The blob ${m.digest}`, o, async () => {
      if ((await fileSize(dest)) === m.bytes.length) return;
      const part = await PartialFile.open(dest);
      try {
        await part.truncate();
        part.appendSync(m.bytes);
        await part.commit(dest);
      } finally {
        await part.close();
      }
    });
  }
  if (r.config.size > MAX_JSON_BYTES) throw new StagedrootError('UNSAFE_ENTRY', `${client.image}: the config ${r.config.digest} is ${r.config.size} bytes (limit ${MAX_JSON_BYTES} for an image document)`, { path: r.config.digest });
  const configPath = path.join(dir, blobPath(r.config.digest));
  const f = await underLock(configPath, `The blob ${r.config.digest}`, o, () => client.fetchBlob(r.config, configPath, 'the config'));
  o.onBlob?.({ digest: r.config.digest, what: 'the config', size: r.config.size, ...f });
  const config = await readSmallFile(configPath, MAX_JSON_BYTES);
  if (config === null || digestOf(config, r.config.digest.slice(0, r.config.digest.indexOf(':'))) !== r.config.digest) {
    throw new StagedrootError('SOURCE_CORRUPT', `${client.image}: the config ${r.config.digest} in ${dir} changed after it was verified`, { path: r.config.digest });
  }
  client.setRetries(o.retries); // the layers: retried wherever they come from
  return { ref, client, ...(ep.mirror ? { mirror: `${ep.ref.registry}/${ep.ref.repository}` } : {}), resolved: r, dir, config, fetched: f.fetched, cached: f.cached };
}

/**
 * The second half: the layers (several at once), then `oci-layout` and an `index.json`
 * naming the manifest, so that `dir` is an OCI image layout holding the image.
 */
export async function fetchLayers(rp: ResolvedPull, o: PullOptions = {}): Promise<PulledImage> {
  const { client, resolved: r, dir, ref } = rp;
  let { fetched, cached } = rp;
  // Free space for what is still to come, checked before the first byte of a layer is fetched.
  let needed = 0;
  for (const l of r.layers) {
    const dest = path.join(dir, blobPath(l.digest));
    if ((await fileSize(dest)) === l.size) continue;
    needed += l.size - Math.min(l.size, (await fileSize(`${dest}.partial`)) ?? 0);
  }
  const reserve = o.reserveBytes ?? 0;
  const { free } = freeSpace(dir);
  if (needed > 0 && needed + reserve > free) {
    throw new StagedrootError('NO_SPACE', `Not enough free space to pull ${client.image}: its layers need ${needed} more bytes${reserve ? ` (and ${reserve} kept free)` : ''}, ${free} bytes are free on the filesystem of ${dir}`, {
      path: dir,
      issues: [{ code: 'NO_SPACE', path: '', message: `needed ${needed + reserve} bytes, free ${free} bytes`, severity: 'error' }],
    });
  }
  const queue = r.layers.map((l, i) => ({ l, what: `layer ${i + 1} of ${r.layers.length}` }));
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const { l, what } = next;
      const dest = path.join(dir, blobPath(l.digest));
      const f = await underLock(dest, `The blob ${l.digest}`, o, () => client.fetchBlob(l, dest, what, o.onProgress && ((p) => o.onProgress!({ digest: l.digest, what, ...p }))));
      fetched += f.fetched;
      cached += f.cached;
      o.onBlob?.({ digest: next.l.digest, what: next.what, size: next.l.size, ...f });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(o.parallel ?? 3, queue.length)) }, worker));
  await addToIndex(dir, { mediaType: r.manifest.mediaType, digest: r.manifest.digest, size: r.manifest.bytes.length, annotations: { [REF_ANNOTATION]: ref.tag ?? formatReference(ref) } }, o);
  const resolvedDigest = (r.index ?? r.manifest).digest;
  return {
    dir,
    digest: r.manifest.digest,
    mediaType: r.manifest.mediaType,
    resolvedDigest,
    pullspec: formatReference({ ...ref, tag: undefined, digest: resolvedDigest }),
    registry: client.origin,
    ...(rp.mirror ? { mirror: rp.mirror } : {}),
    ...(r.platform ? { platform: r.platform } : {}),
    credentials: client.credentialsUsed,
    fetched,
    cached,
  };
}

interface IndexEntry {
  mediaType: string;
  digest: string;
  size: number;
  annotations: Record<string, string>;
}

/**
 * Adds the manifest to the directory's `index.json` (and writes `oci-layout`), keeping
 * every other image it names: the directory is shared by every pull into it, and a
 * stage reads its image from it by digest after the pull. The read, merge and write
 * (a temp file renamed over it) run under the index's lock, so that two pulls ending
 * at once both find their image named (none overwrites the other's entry). The newest
 * comes first: a tag pulled again names its new manifest first (resolveOci by ref).
 */
async function addToIndex(dir: string, entry: IndexEntry, o: PullOptions): Promise<void> {
  const file = path.join(dir, 'index.json');
  await underLock(file, `The index ${file}`, o, async () => {
    const dfs = new DurableFs();
    if ((await fileSize(path.join(dir, 'oci-layout'))) === null) dfs.writeFileAtomic(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }) + '\n');
    const kept: unknown[] = [];
    const old = await readSmallFile(file, MAX_JSON_BYTES).catch(() => null);
    if (old !== null) {
      try {
        const doc = JSON.parse(old.toString('utf8')) as { manifests?: unknown };
        // What is not a descriptor of another manifest is dropped (the index is the pulls' own; its blobs stay).
        if (Array.isArray(doc.manifests)) for (const m of doc.manifests) if (m && typeof m === 'object' && typeof (m as { digest?: unknown }).digest === 'string' && (m as { digest: string }).digest !== entry.digest) kept.push(m);
      } catch {
        // An index.json that is not JSON (an older writer cut short) is replaced.
      }
    }
    dfs.writeFileAtomic(file, JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [entry, ...kept] }) + '\n');
  });
}

/**
 * Pulls an image into `dir` as an OCI image layout: its manifest (and the index it was
 * picked from), config and layers as blobs (each verified as it arrives; see
 * RegistryClient.fetchBlob), then `oci-layout` and an `index.json` naming the manifest,
 * so that the image is read as any local layout (src/sources/oci/). A blob already
 * whole in `dir` is not fetched again; what an interrupted pull left is resumed.
 */
export async function pullImage(ref: ImageReference, dir: string, o: PullOptions = {}): Promise<PulledImage> {
  return fetchLayers(await resolvePull(ref, dir, o), o);
}
