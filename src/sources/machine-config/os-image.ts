import { StagedrootError } from '../../errors.js';
import { statPath } from '../../fs/core/host-paths.js';
import type { Source, SourceInfo } from '../source.js';
import { imageSource, isImageLayout } from '../oci/image-source.js';
import type { ImageOptions } from '../oci/resolve.js';

/** An image reference split: `registry/repo@sha256:…` names a digest, `registry/repo:tag` a tag. */
export function parseImageReference(url: string): { digest?: string; tag?: string } {
  const at = url.lastIndexOf('@');
  if (at !== -1) return { digest: url.slice(at + 1) };
  const lastSlash = url.lastIndexOf('/');
  const colon = url.lastIndexOf(':');
  return colon > lastSlash ? { tag: url.slice(colon + 1) } : {};
}

/**
 * The image a MachineConfig's spec.osImageURL names, found in a local image store (an
 * OCI layout directory or an oci-archive; nothing is pulled from a registry): by digest
 * for `repo@sha256:…` (the manifest or index with that digest), else by the index's
 * `org.opencontainers.image.ref.name`, the whole reference first, then its tag (what
 * `skopeo copy docker://REF oci:DIR:TAG` writes).
 */
export function osImageSource(store: string, url: string, o: Pick<ImageOptions, 'platform'> = {}): Source {
  const st = statPath(store);
  if (st === null) throw new StagedrootError('USAGE', `The image store ${store} does not exist`, { option: 'imageStore', value: store });
  if (st.isDirectory() && !isImageLayout(store)) {
    throw new StagedrootError('USAGE', `The image store ${store} is not an OCI image layout (no oci-layout and index.json)`, { option: 'imageStore', value: store });
  }
  const ref = parseImageReference(url);
  if (ref.digest !== undefined) return imageSource(store, { ...o, digest: ref.digest });
  const whole = imageSource(store, { ...o, ref: url });
  if (ref.tag === undefined) return whole;
  let chosen: Promise<Source> | undefined;
  const get = (): Promise<Source> =>
    (chosen ??= whole.inspect!().then(
      () => whole,
      async (err: unknown) => {
        // The layout names no manifest by the whole URL (resolve.ts says so by option 'ref'): try its tag.
        if (!(err instanceof StagedrootError) || err.code !== 'SOURCE_UNSUPPORTED' || err.option !== 'ref' || err.value !== url) throw err;
        const byTag = imageSource(store, { ...o, ref: ref.tag });
        await byTag.inspect!();
        return byTag;
      },
    ));
  return {
    kind: 'image',
    describe: `image ${url} in ${store}`,
    inspect: async (): Promise<SourceInfo> => (await get()).inspect!(),
    plan: async (base, c) => (await get()).plan(base, c),
  };
}
