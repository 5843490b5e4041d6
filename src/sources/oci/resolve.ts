import { StagedrootError } from '../../errors.js';
import type { BlobStore } from './blob-store.js';
import { checkDigest } from '../../util/digest-form.js';
import { blobPath, digestOf } from './digest.js';
import { CONFIG_TYPES, INDEX_TYPES, LAYER_TYPES, MANIFEST_TYPES, REF_ANNOTATION } from './media-types.js';
import { hostPlatform, platformMatches, showPlatform, type Platform } from './platform.js';
import { blobName, checkPresent, descriptor, parseJson, readSmall, readVerified, type Descriptor } from './read-blob.js';
import { parseJsonDocument } from '../document.js';

export interface ImageOptions {
  /** OS/ARCH[/VARIANT] (default: linux and this host's architecture). */
  platform?: Platform;
  /** The manifest named so in the index (org.opencontainers.image.ref.name; a RepoTag of a docker archive). */
  ref?: string;
  /**
   * The manifest (or index) with this digest ("sha256:…"), as an image reference by
   * digest names it (an OCI layout only: a docker archive has no manifest digests).
   */
  digest?: string;
}

export interface ImageLayer {
  /** Its path in the image ("blobs/sha256/HEX", "HEX/layer.tar"). */
  name: string;
  /** For messages: "blob sha256:... (layer 2 of 3)". */
  what: string;
  /** The digest the bytes must have: of the blob as stored, or (docker archives) of the uncompressed tar. */
  digest: string;
  /** Whether `digest` is of the stored bytes or of the uncompressed tar (a diff id). */
  of: 'blob' | 'uncompressed';
  size: number | null;
}

export interface ResolvedImage {
  store: BlobStore;
  /** The selected manifest's digest (a docker archive has none: its config's digest, the image id). */
  digest: string;
  mediaType: string;
  /** The selected manifest blob, what a signature of an image layout covers. */
  manifest: Buffer | null;
  platform?: string;
  ref?: string;
  labels: Record<string, string>;
  layers: ImageLayer[];
  /** The layers' diff_ids as the config lists them (checked only when each layer is imported). */
  diffIds: string[];
}

interface Config {
  os?: string;
  architecture?: string;
  variant?: string;
  labels: Record<string, string>;
  diffIds: unknown[];
}

function configOf(doc: Record<string, unknown>): Config {
  const c = (doc.config ?? doc.container_config ?? {}) as { Labels?: unknown };
  const labels: Record<string, string> = {};
  if (c.Labels && typeof c.Labels === 'object') for (const [k, v] of Object.entries(c.Labels)) if (typeof v === 'string') labels[k] = v;
  const rootfs = doc.rootfs as { diff_ids?: unknown } | undefined;
  return {
    os: typeof doc.os === 'string' ? doc.os : undefined,
    architecture: typeof doc.architecture === 'string' ? doc.architecture : undefined,
    variant: typeof doc.variant === 'string' ? doc.variant : undefined,
    labels,
    diffIds: Array.isArray(rootfs?.diff_ids) ? rootfs.diff_ids : [],
  };
}

const reject = (code: 'SOURCE_CORRUPT' | 'SOURCE_UNSUPPORTED', message: string, path?: string): never => {
  throw new StagedrootError(code, message, { ...(path === undefined ? {} : { path }) });
};

/** Reads an OCI image layout (index.json) and picks the manifest for the platform or --ref. */
export async function resolveOci(store: BlobStore, o: ImageOptions): Promise<ResolvedImage> {
  const where = store.describe;
  const indexBytes = await readSmall(store, 'index.json');
  if (indexBytes === null) return reject('SOURCE_CORRUPT', `${where} has no index.json`, 'index.json');
  const index = parseJson(indexBytes, 'index.json', where);
  if (index.schemaVersion !== 2 || !Array.isArray(index.manifests)) return reject('SOURCE_CORRUPT', `${where}: index.json is not an OCI image index (schemaVersion 2 with a manifests list)`, 'index.json');
  let cands = (index.manifests as unknown[]).map((m, i) => descriptor(m, `index.json manifests[${i}]`, where));
  const refOf = (d: Descriptor) => d.annotations?.[REF_ANNOTATION];
  if (o.ref !== undefined) {
    const named = cands.filter((d) => refOf(d) === o.ref);
    if (named.length === 0) {
      const names = cands.map(refOf).filter((r) => r !== undefined);
      // option and value say which: a caller trying another name (os-image.ts) reads them, not the message.
      throw new StagedrootError('SOURCE_UNSUPPORTED', `${where} has no manifest named ${JSON.stringify(o.ref)} (${names.length ? `names: ${names.join(', ')}` : 'its index names none'})`, { path: 'index.json', option: 'ref', value: o.ref });
    }
    cands = named;
  }
  if (o.digest !== undefined) {
    const byDigest = cands.filter((d) => d.digest === o.digest);
    if (byDigest.length === 0) return reject('SOURCE_UNSUPPORTED', `${where} has no manifest or index ${o.digest} (it has ${cands.map((d) => d.digest).join(', ') || 'none'})`, 'index.json');
    cands = byDigest;
  }
  // A nested index (a multi-arch image copied whole) is opened one level deep.
  const expanded: { d: Descriptor; ref?: string }[] = [];
  for (const d of cands) {
    if (INDEX_TYPES.has(d.mediaType)) {
      const child = parseJson(await readVerified(store, d, 'a nested index'), blobName(d.digest, 'a nested index'), where);
      if (!Array.isArray(child.manifests)) return reject('SOURCE_CORRUPT', `${where}: ${blobName(d.digest, 'a nested index')} has no manifests list`, d.digest);
      (child.manifests as unknown[]).forEach((m, i) => expanded.push({ d: descriptor(m, `manifests[${i}] of ${d.digest}`, where), ref: refOf(d) }));
    } else expanded.push({ d, ref: refOf(d) });
  }
  const manifests = expanded.filter((c) => MANIFEST_TYPES.has(c.d.mediaType));
  if (manifests.length === 0) {
    const first = expanded[0]?.d;
    return reject('SOURCE_UNSUPPORTED', first ? `${where}: ${blobName(first.digest, 'the manifest')} has the unknown media type ${JSON.stringify(first.mediaType)}` : `${where}: index.json lists no manifest`, first?.digest ?? 'index.json');
  }
  const want = o.platform ?? hostPlatform();
  // The index's platform when it has one; umoci writes none, so then the config's.
  const seen: string[] = [];
  let chosen: { d: Descriptor; ref?: string; manifest: Record<string, unknown>; bytes: Buffer; config: Config } | null = null;
  for (const c of manifests) {
    if (c.d.platform?.os !== undefined && c.d.platform.architecture !== undefined && !platformMatches(c.d.platform, want)) {
      seen.push(`${showPlatform(c.d.platform)} (${c.d.digest})`);
      continue;
    }
    const bytes = await readVerified(store, c.d, 'the manifest');
    const manifest = parseJson(bytes, blobName(c.d.digest, 'the manifest'), where);
    const config = await readConfig(store, manifest, c.d.digest);
    if (config.os !== undefined && config.architecture !== undefined && !platformMatches(config, want)) {
      seen.push(`${showPlatform(config)} (${c.d.digest})`);
      continue;
    }
    chosen = { ...c, manifest, bytes, config };
    break;
  }
  if (chosen === null) {
    return reject('SOURCE_UNSUPPORTED', `${where} has no manifest for ${showPlatform(want)}: it has ${seen.join(', ')} (choose one with --platform)`, manifests[0]!.d.digest);
  }
  const { d, manifest, config } = chosen;
  const mt = typeof manifest.mediaType === 'string' ? manifest.mediaType : d.mediaType;
  if (!MANIFEST_TYPES.has(mt)) return reject('SOURCE_UNSUPPORTED', `${where}: ${blobName(d.digest, 'the manifest')} has the unknown media type ${JSON.stringify(mt)}`, d.digest);
  if (!Array.isArray(manifest.layers)) return reject('SOURCE_CORRUPT', `${where}: ${blobName(d.digest, 'the manifest')} has no layers list`, d.digest);
  const layerDescs = (manifest.layers as unknown[]).map((l, i) => descriptor(l, `layer ${i + 1}`, where));
  const layers = layerDescs.map((l, i): ImageLayer => {
    const what = `layer ${i + 1} of ${layerDescs.length}`;
    if (!LAYER_TYPES.has(l.mediaType)) reject('SOURCE_UNSUPPORTED', `${where}: ${blobName(l.digest, what)} has the unknown media type ${JSON.stringify(l.mediaType)}`, l.digest);
    checkPresent(store, l, what);
    return { name: blobPath(l.digest), what: blobName(l.digest, what), digest: l.digest, of: 'blob', size: l.size };
  });
  const platform = config.os && config.architecture ? showPlatform(config) : d.platform?.os && d.platform.architecture ? showPlatform(d.platform) : undefined;
  return { store, digest: d.digest, mediaType: mt, manifest: chosen.bytes, labels: config.labels, layers, diffIds: config.diffIds.filter((x): x is string => typeof x === 'string'), ...(platform ? { platform } : {}), ...(chosen.ref ? { ref: chosen.ref } : {}) };
}

async function readConfig(store: BlobStore, manifest: Record<string, unknown>, manifestDigest: string): Promise<Config> {
  const where = store.describe;
  const c = descriptor(manifest.config, `the config of ${manifestDigest}`, where);
  if (!CONFIG_TYPES.has(c.mediaType)) return reject('SOURCE_UNSUPPORTED', `${where}: ${blobName(c.digest, 'the config')} has the unknown media type ${JSON.stringify(c.mediaType)}`, c.digest);
  return configOf(parseJson(await readVerified(store, c, 'the config'), blobName(c.digest, 'the config'), where));
}

interface DockerEntry {
  Config?: unknown;
  RepoTags?: unknown;
  Layers?: unknown;
}

/** Reads a `docker save` archive (manifest.json): the image by RepoTag, or the only one, or by platform. */
export async function resolveDocker(store: BlobStore, o: ImageOptions): Promise<ResolvedImage> {
  const where = store.describe;
  const bytes = await readSmall(store, 'manifest.json');
  const list = parseJsonDocument(bytes?.toString('utf8') ?? 'null', `${where}: manifest.json`, { code: 'SOURCE_CORRUPT', path: 'manifest.json' });
  if (!Array.isArray(list) || list.length === 0) return reject('SOURCE_CORRUPT', `${where}: manifest.json is not a list of images`, 'manifest.json');
  const entries = list as DockerEntry[];
  if (o.digest !== undefined) return reject('SOURCE_UNSUPPORTED', `${where} is a docker archive: its images have no manifest digest to match ${o.digest} (use an OCI layout or oci-archive)`, 'manifest.json');
  const tags = (e: DockerEntry) => (Array.isArray(e.RepoTags) ? e.RepoTags.filter((t): t is string => typeof t === 'string') : []);
  let cands = entries;
  if (o.ref !== undefined) {
    // docker writes tags normalised: "example/os:1" is saved as "docker.io/example/os:1"
    const wanted = new Set([o.ref, `docker.io/${o.ref}`, `docker.io/library/${o.ref}`]);
    cands = entries.filter((e) => tags(e).some((t) => wanted.has(t)));
    if (cands.length === 0) return reject('SOURCE_UNSUPPORTED', `${where} has no image tagged ${JSON.stringify(o.ref)} (tags: ${entries.flatMap(tags).join(', ') || 'none'})`, 'manifest.json');
  }
  const want = o.platform ?? hostPlatform();
  const seen: string[] = [];
  for (const e of cands) {
    if (typeof e.Config !== 'string') return reject('SOURCE_CORRUPT', `${where}: an image in manifest.json has no Config`, 'manifest.json');
    const hex = /([a-f0-9]{64})(\.json)?$/.exec(e.Config)?.[1];
    if (!hex) return reject('SOURCE_UNSUPPORTED', `${where}: the config ${JSON.stringify(e.Config)} is not named by its digest, so it cannot be verified`, e.Config);
    const cd = checkDigest(`sha256:${hex}`, 'the config', where);
    const size = store.size(e.Config);
    if (size === null) return reject('SOURCE_CORRUPT', `${where} is incomplete: ${e.Config} (the config) is missing`, e.Config);
    const data = await readSmall(store, e.Config);
    if (digestOf(data!) !== cd) return reject('SOURCE_CORRUPT', `${where}: ${e.Config} (the config) does not match its digest ${cd}`, e.Config);
    const config = configOf(parseJson(data!, e.Config, where));
    if (config.os !== undefined && config.architecture !== undefined && !platformMatches(config, want)) {
      seen.push(`${showPlatform(config)} (${e.Config})`);
      continue;
    }
    const names = Array.isArray(e.Layers) ? e.Layers : [];
    if (names.length !== config.diffIds.length) return reject('SOURCE_CORRUPT', `${where}: ${e.Config} lists ${config.diffIds.length} layer digests for ${names.length} layers`, e.Config);
    const layers = names.map((n, i): ImageLayer => {
      const what = `layer ${i + 1} of ${names.length}`;
      if (typeof n !== 'string') return reject('SOURCE_CORRUPT', `${where}: ${what} has no file name`, 'manifest.json');
      const digest = checkDigest(config.diffIds[i], what, where);
      if (store.size(n) === null) return reject('SOURCE_CORRUPT', `${where} is incomplete: ${n} (${what}, ${digest}) is missing`, n);
      return { name: n, what: `${n} (${what}, ${digest})`, digest, of: 'uncompressed', size: null };
    });
    const platform = config.os && config.architecture ? showPlatform(config) : undefined;
    const ref = o.ref ?? tags(e)[0];
    return { store, digest: cd, mediaType: 'application/vnd.docker.container.image.v1+json', manifest: null, labels: config.labels, layers, diffIds: layers.map((l) => l.digest), ...(platform ? { platform } : {}), ...(ref ? { ref } : {}) };
  }
  return reject('SOURCE_UNSUPPORTED', `${where} has no image for ${showPlatform(want)}: it has ${seen.join(', ')} (choose one with --platform)`, 'manifest.json');
}
