/** The OCI and Docker media types an image may use (image-spec media-types.md, Docker's v2 schema 2). */
export const INDEX_TYPES = new Set(['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json']);
export const MANIFEST_TYPES = new Set(['application/vnd.oci.image.manifest.v1+json', 'application/vnd.docker.distribution.manifest.v2+json']);
export const CONFIG_TYPES = new Set(['application/vnd.oci.image.config.v1+json', 'application/vnd.docker.container.image.v1+json']);
export const LAYER_TYPES = new Set([
  'application/vnd.oci.image.layer.v1.tar',
  'application/vnd.oci.image.layer.v1.tar+gzip',
  'application/vnd.oci.image.layer.v1.tar+zstd',
  'application/vnd.oci.image.layer.nondistributable.v1.tar',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
  'application/vnd.docker.image.rootfs.diff.tar',
  'application/vnd.docker.image.rootfs.diff.tar.gzip',
  'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
]);

/** The label that names an image's version: a deployment's label when none is given. */
export const VERSION_LABEL = 'org.opencontainers.image.version';
/** The index annotation that names a manifest (`--ref`). */
export const REF_ANNOTATION = 'org.opencontainers.image.ref.name';
