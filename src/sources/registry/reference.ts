import { StagedrootError, type ErrorCode } from '../../errors.js';

/**
 * An image in a registry, as `docker://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST)` or a bare
 * pullspec (what a MachineConfig's `spec.osImageURL` holds) names it, normalised as
 * skopeo and podman do (github.com/distribution/reference): a first component without a
 * `.` or `:` that is not `localhost` is a path in `docker.io`, a one-component repository
 * of docker.io is under `library/`, no tag and no digest is the tag `latest`.
 */
export interface ImageReference {
  /** As written. */
  input: string;
  /** The registry as named: "quay.io", "localhost:5000", "docker.io". */
  registry: string;
  /** "openshift-release-dev/ocp-v4.0-art-dev", "library/busybox". */
  repository: string;
  /** The tag, when the reference names one (or none, `latest`). */
  tag?: string;
  /** The manifest digest, when the reference names one. */
  digest?: string;
}

/** The transport prefix skopeo and podman use for a registry. */
export const DOCKER_TRANSPORT = 'docker://';
export const DEFAULT_REGISTRY = 'docker.io';
/** Where docker.io is served from (docker's and containers/image's default endpoint). */
export const DOCKER_IO_ENDPOINT = 'registry-1.docker.io';

const NAME_MAX = 255; // distribution/reference NameTotalLengthMax
// A host name (labels of letters, digits and inner dashes joined by dots) or a bracketed IPv6 address, and an optional port.
const DOMAIN = /^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*|\[[0-9a-fA-F:.]+\])(?::([0-9]+))?$/;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^(?:sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;

/** Whether a source argument names a registry image (`docker://…`). */
export function isRegistryReference(s: string): boolean {
  return s.startsWith(DOCKER_TRANSPORT);
}

export interface ParseOptions {
  /** The code of the error a bad reference throws (default USAGE; a MachineConfig's field: SPEC_INVALID). */
  code?: ErrorCode;
  /** What the input is, for the message ("the source", "spec.osImageURL"). */
  what?: string;
}

/** `docker://HOST[:PORT]/REPO(:TAG|@DIGEST)`; anything else (another transport, no `//`) is refused. */
export function parseDockerReference(input: string, o: ParseOptions = {}): ImageReference {
  if (!input.startsWith(DOCKER_TRANSPORT)) {
    const bad = /^docker:(?!\/\/)/.test(input) ? ` (the transport is written docker:// with two slashes)` : '';
    fail(input, `it does not start with ${DOCKER_TRANSPORT}${bad}`, o);
  }
  return parsePullspec(input.slice(DOCKER_TRANSPORT.length), { ...o, input });
}

/** A bare pullspec (`quay.io/org/repo@sha256:…`, `registry:5000/os:1`, `busybox`), as a MachineConfig's osImageURL writes it. */
export function parsePullspec(spec: string, o: ParseOptions & { input?: string } = {}): ImageReference {
  const input = o.input ?? spec;
  const bad = (why: string): never => fail(input, why, o);
  if (spec === '') bad('it names no image');
  if (/\s/.test(spec)) bad('it contains white space');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) bad(`a pullspec has no scheme ("${spec.slice(0, spec.indexOf('://') + 3)}"): write HOST/REPO`);
  let rest = spec;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at !== -1) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) bad(`${JSON.stringify(digest)} is not a digest (sha256: and 64 lowercase hex digits)`);
  }
  let tag: string | undefined;
  const slash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > slash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) bad(`${JSON.stringify(tag)} is not a tag (up to 128 letters, digits, _ . -, not starting with . or -)`);
  }
  if (tag !== undefined && digest !== undefined) bad('it names both a tag and a digest; name one (as skopeo, stagedroot cannot ask a registry for both)');
  if (rest === '') bad('it names no repository');
  const parts = rest.split('/');
  let registry = DEFAULT_REGISTRY;
  const first = parts[0]!;
  // distribution/reference splitDockerDomain: a first component is a host when it has a . or :, is localhost, or has capitals.
  if (parts.length > 1 && (/[.:]/.test(first) || first === 'localhost' || first.toLowerCase() !== first)) {
    registry = parts.shift()!;
    if (!DOMAIN.test(registry)) bad(`${JSON.stringify(registry)} is not a registry host (HOST or HOST:PORT)`);
    const port = DOMAIN.exec(registry)![1];
    if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) bad(`${port} is not a port`);
  }
  if (registry === 'index.docker.io') registry = DEFAULT_REGISTRY;
  for (const c of parts) {
    if (c === '') bad('its repository has an empty path component (a doubled or trailing /)');
    if (c.toLowerCase() !== c && PATH_COMPONENT.test(c.toLowerCase())) bad(`the repository name ${JSON.stringify(parts.join('/'))} must be lowercase`);
    if (!PATH_COMPONENT.test(c)) bad(`${JSON.stringify(c)} is not a repository path component (lowercase letters and digits, separated by . _ __ or -)`);
  }
  if (registry === DEFAULT_REGISTRY && parts.length === 1) parts.unshift('library');
  const repository = parts.join('/');
  if (registry.length + 1 + repository.length > NAME_MAX) bad(`the name is longer than ${NAME_MAX} characters`);
  if (tag === undefined && digest === undefined) tag = 'latest';
  return { input, registry, repository, ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) };
}

function fail(input: string, why: string, o: ParseOptions): never {
  const code = o.code ?? 'USAGE';
  throw new StagedrootError(code, `${o.what ?? 'The image reference'} ${JSON.stringify(input)} is not a valid image reference: ${why}`, { value: input, ...(code === 'USAGE' ? {} : { path: o.what ?? input }) });
}

/** `registry/repository:tag` or `registry/repository@digest`: the normalised name (what skopeo prints). */
export function formatReference(r: ImageReference): string {
  return `${r.registry}/${r.repository}${r.digest !== undefined ? `@${r.digest}` : `:${r.tag}`}`;
}

/** The same image by digest: what is recorded once a tag has been resolved. */
export function byDigest(r: ImageReference, digest: string): ImageReference {
  const { tag: _tag, ...rest } = r;
  return { ...rest, digest };
}

/** The host (and port) to connect to for a registry: docker.io is served from registry-1.docker.io. */
export function registryEndpoint(registry: string): string {
  return registry === DEFAULT_REGISTRY ? DOCKER_IO_ENDPOINT : registry;
}
