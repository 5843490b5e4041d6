import * as path from 'node:path';
import { StagedrootError } from '../../errors.js';
import { removeFile } from '../../fs/trees/fetch-file.js';
import type { Origin } from '../../state/schema.js';
import { bytesPayload } from '../../trust/payload.js';
import type { LayerLimits } from '../layer/entry-checks.js';
import { blobPath } from '../oci/digest.js';
import { imageSource } from '../oci/image-source.js';
import { VERSION_LABEL } from '../oci/media-types.js';
import { showPlatform } from '../oci/platform.js';
import { parseJson } from '../oci/read-blob.js';
import type { Source, SourceInfo } from '../source.js';
import { findAuthFile } from './auth-file.js';
import { fetchLayers, resolvePull, type PulledImage, type PullOptions, type ResolvedPull } from './pull.js';
import { formatReference, type ImageReference } from './reference.js';

/** Where images pulled from a registry are kept as an OCI layout, their blobs shared (default of `blobDir`). */
export const DEFAULT_BLOB_DIR = '/var/cache/stagedroot/registry';

export interface RegistrySourceOptions extends PullOptions {
  /** The OCI layout the image is pulled into (default DEFAULT_BLOB_DIR); blobs already there are not fetched again. */
  blobDir?: string;
  /** `--authfile`: the credentials file (else the first of AUTH_FILES that exists). */
  authfile?: string;
  limits?: Partial<LayerLimits>;
}

/**
 * An image in a registry as a source (`stagedroot stage docker://…`). Inspecting it
 * resolves the reference once (a tag to a digest, an index to the platform's manifest)
 * and fetches the manifest and config only: the booted deployment already running that
 * digest stages nothing and fetches no layer. Planning it fetches the layers into
 * `blobDir`, an OCI layout, and plans that layout's image (src/sources/oci/) by the
 * manifest's digest. Its origin keeps the pullspec, the digest and the registry that
 * served it.
 */
/** The paths of the options a later `upgrade` gives again (origin.pulledWith), absolute; none given: undefined. */
export function pullPaths(o: RegistrySourceOptions): NonNullable<Origin['pulledWith']> | undefined {
  const w: NonNullable<Origin['pulledWith']> = {};
  if (o.authfile !== undefined) w.authfile = path.resolve(o.authfile);
  if (o.certsDir !== undefined) w.certsDir = path.resolve(o.certsDir);
  if (o.blobDir !== undefined) w.blobDir = path.resolve(o.blobDir);
  if (typeof o.registriesConf === 'string') w.registriesConf = path.resolve(o.registriesConf);
  return Object.keys(w).length > 0 ? w : undefined;
}

export function registrySource(ref: ImageReference, o: RegistrySourceOptions = {}): Source {
  const dir = o.blobDir ?? DEFAULT_BLOB_DIR;
  const pulledWith = pullPaths(o);
  const name = formatReference(ref);
  let resolving: Promise<ResolvedPull> | undefined;
  const resolve = () =>
    (resolving ??= (async () => {
      const auth = o.auth !== undefined ? o.auth : await findAuthFile(o.authfile === undefined ? {} : { authfile: o.authfile });
      return resolvePull(ref, dir, { ...o, auth });
    })());
  let pulling: Promise<{ pulled: PulledImage; inner: Source }> | undefined;
  const pull = () =>
    (pulling ??= (async () => {
      const pulled = await fetchLayers(await resolve(), o);
      return { pulled, inner: imageSource(dir, { digest: pulled.digest, ...(o.platform ? { platform: o.platform } : {}), ...(o.limits ? { limits: o.limits } : {}) }) };
    })());
  return {
    kind: 'image',
    describe: `image ${name}`,
    async inspect(): Promise<SourceInfo> {
      const rp = await resolve();
      const { manifest, index, platform: indexed } = rp.resolved;
      const doc = parseJson(rp.config, `blob ${rp.resolved.config.digest} (the config)`, `image ${name}`);
      const c = (doc.config ?? {}) as { Labels?: unknown };
      const labels: Record<string, string> = {};
      if (c.Labels && typeof c.Labels === 'object') for (const [k, v] of Object.entries(c.Labels)) if (typeof v === 'string') labels[k] = v;
      const platform = typeof doc.os === 'string' && typeof doc.architecture === 'string' ? showPlatform({ os: doc.os, architecture: doc.architecture, ...(typeof doc.variant === 'string' ? { variant: doc.variant } : {}) }) : indexed;
      const origin: Origin = {
        kind: 'oci-image',
        digest: manifest.digest,
        mediaType: manifest.mediaType,
        labels,
        ...(ref.tag !== undefined ? { ref: ref.tag } : {}),
        ...(platform ? { platform } : {}),
        pullspec: name,
        registry: rp.client.origin,
        ...(rp.mirror ? { mirror: rp.mirror } : {}),
        ...(index ? { indexDigest: index.digest } : {}),
        ...(pulledWith ? { pulledWith } : {}),
      };
      return {
        // The manifest is what a signature of a pulled image covers (given with --signature).
        signed: { payload: bytesPayload(manifest.bytes, `the manifest ${manifest.digest} of image ${name}`), defaultSignature: path.join(dir, `${manifest.digest.replace(':', '-')}.minisig`) },
        origin,
        ...(labels[VERSION_LABEL] ? { label: labels[VERSION_LABEL] } : {}),
        diffIds: diffIdsOf(doc),
      };
    },
    async plan(base, c) {
      const { pulled, inner } = await pull();
      let set;
      try {
        set = await inner.plan(base, c);
      } catch (err) {
        // A blob of the directory that does not match its digest (changed on the disk since it was
        // fetched and verified) is removed, so that the next pull fetches it again instead of failing forever.
        const bad = err instanceof StagedrootError && err.code === 'SOURCE_CORRUPT' ? (await resolve()).resolved.layers.find((l) => err.digest === l.digest) : undefined;
        if (bad !== undefined) {
          await removeFile(path.join(dir, blobPath(bad.digest)));
          throw new StagedrootError('SOURCE_CORRUPT', `${err instanceof Error ? err.message : String(err)} (removed from ${dir}: the next pull fetches it again)`, { path: bad.digest, digest: bad.digest, cause: err });
        }
        throw err;
      }
      // Which credentials file was used (never what it holds) is said with what was pulled.
      const v = (await resolve()).verdict;
      const signed = v && v.signedBy.length > 0 ? `, signed by ${v.signedBy.join(', ')} (${v.scope})` : '';
      return { ...set, description: `image ${name} (${pulled.digest}) pulled from ${pulled.registry}${pulled.mirror ? ` (the mirror ${pulled.mirror})` : ''} with ${pulled.credentials}${signed}: ${set.description}` };
    },
  };
}

/** The diff_ids an image config lists (a hint: see SourceInfo.diffIds). */
function diffIdsOf(config: Record<string, unknown>): string[] {
  const ids = (config.rootfs as { diff_ids?: unknown } | undefined)?.diff_ids;
  return Array.isArray(ids) ? ids.filter((x): x is string => typeof x === 'string') : [];
}
