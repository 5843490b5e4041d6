import * as path from 'node:path';
import type { LayerLimits } from '../layer/entry-checks.js';
import { imageSource } from '../oci/image-source.js';
import type { Source, SourceInfo } from '../source.js';
import { findAuthFile } from './auth-file.js';
import { pullImage, type PulledImage, type PullOptions } from './pull.js';
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
 * An image in a registry as a source (`stagedroot stage docker://…`): inspecting it pulls
 * it (the tag resolved once, then everything by digest) into `blobDir` as an OCI layout,
 * then it is that layout's image (src/sources/oci/), by the pulled manifest's digest.
 * Its origin keeps the pullspec, the digest, and the registry that served it.
 */
export function registrySource(ref: ImageReference, o: RegistrySourceOptions = {}): Source {
  const dir = o.blobDir ?? DEFAULT_BLOB_DIR;
  const name = formatReference(ref);
  let pulling: Promise<{ pulled: PulledImage; inner: Source }> | undefined;
  const get = () =>
    (pulling ??= (async () => {
      const auth = o.auth !== undefined ? o.auth : await findAuthFile(o.authfile === undefined ? {} : { authfile: o.authfile });
      const pulled = await pullImage(ref, dir, { ...o, auth });
      return { pulled, inner: imageSource(dir, { digest: pulled.digest, ...(o.platform ? { platform: o.platform } : {}), ...(o.limits ? { limits: o.limits } : {}) }) };
    })());
  return {
    kind: 'image',
    describe: `image ${name}`,
    async inspect(): Promise<SourceInfo> {
      const { pulled, inner } = await get();
      const info = await inner.inspect!();
      const { ref: _ref, ...origin } = info.origin!;
      return {
        ...info,
        // The manifest is what a signature of a pulled image covers; its signature is given with --signature.
        ...(info.signed ? { signed: { ...info.signed, defaultSignature: path.join(dir, `${pulled.digest.replace(':', '-')}.minisig`) } } : {}),
        origin: {
          ...origin,
          ...(ref.tag !== undefined ? { ref: ref.tag } : {}),
          pullspec: name,
          registry: pulled.registry,
          ...(pulled.resolvedDigest !== pulled.digest ? { indexDigest: pulled.resolvedDigest } : {}),
        },
      };
    },
    async plan(base, c) {
      const { pulled, inner } = await get();
      const set = await inner.plan(base, c);
      // Which credentials file was used (never what it holds) is said with what was pulled.
      return { ...set, description: `image ${name} (${pulled.digest}) pulled from ${pulled.registry} with ${pulled.credentials}: ${set.description}` };
    },
  };
}
