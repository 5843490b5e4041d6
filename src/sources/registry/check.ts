import * as path from 'node:path';
import { fileSize } from '../../fs/trees/fetch-file.js';
import { blobPath } from '../oci/digest.js';
import { VERSION_LABEL } from '../oci/media-types.js';
import { parseJson } from '../oci/read-blob.js';
import { findAuthFile } from './auth-file.js';
import { resolvePull } from './pull.js';
import { formatReference, type ImageReference } from './reference.js';
import { DEFAULT_BLOB_DIR, type RegistrySourceOptions } from './source.js';

export interface ImageCheck {
  pullspec: string;
  /** The image manifest's digest (the platform's, when the reference names an index). */
  digest: string;
  indexDigest?: string;
  registry: string;
  /** The mirror (registries.conf) that served the manifest, as HOST/REPO, when one did. */
  mirror?: string;
  /** The config's org.opencontainers.image.version label, when it has one. */
  version?: string;
  /** Each layer, whether it is already whole in the blob directory, and the bytes of one cut short. */
  layers: { digest: string; size: number; present: boolean; partial: number }[];
  /** Bytes of the layers already present (and of partial files, to be resumed). */
  bytesPresent: number;
  /** Bytes still to fetch. */
  bytesNeeded: number;
  /** Which credentials were used (the file, never its content). */
  credentials: string;
}

/**
 * What a pull of the image would fetch, fetching only its manifests and config (bootc's
 * `upgrade --check`): the digest the reference resolves to, its version label, the layers
 * already in the blob directory and those still needed, with their bytes.
 */
export async function checkRegistryImage(ref: ImageReference, o: RegistrySourceOptions = {}): Promise<ImageCheck> {
  const dir = o.blobDir ?? DEFAULT_BLOB_DIR;
  const auth = o.auth !== undefined ? o.auth : await findAuthFile(o.authfile === undefined ? {} : { authfile: o.authfile });
  const rp = await resolvePull(ref, dir, { ...o, auth });
  const doc = parseJson(rp.config, `blob ${rp.resolved.config.digest} (the config)`, `image ${formatReference(ref)}`);
  const labels = ((doc.config ?? {}) as { Labels?: Record<string, unknown> }).Labels ?? {};
  const version = typeof labels[VERSION_LABEL] === 'string' ? (labels[VERSION_LABEL] as string) : undefined;
  const layers = [];
  for (const l of rp.resolved.layers) {
    const dest = path.join(dir, blobPath(l.digest));
    const present = (await fileSize(dest)) === l.size;
    const partial = present ? 0 : Math.min(l.size, (await fileSize(`${dest}.partial`)) ?? 0);
    layers.push({ digest: l.digest, size: l.size, present, partial });
  }
  const bytesPresent = layers.reduce((n, l) => n + (l.present ? l.size : l.partial), 0);
  const bytesNeeded = layers.reduce((n, l) => n + (l.present ? 0 : l.size - l.partial), 0);
  return {
    pullspec: formatReference(ref),
    digest: rp.resolved.manifest.digest,
    ...(rp.resolved.index ? { indexDigest: rp.resolved.index.digest } : {}),
    registry: rp.client.origin,
    ...(rp.mirror ? { mirror: rp.mirror } : {}),
    ...(version !== undefined ? { version } : {}),
    layers,
    bytesPresent,
    bytesNeeded,
    credentials: rp.client.credentialsUsed,
  };
}
