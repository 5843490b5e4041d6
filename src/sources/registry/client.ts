import type { IncomingMessage } from 'node:http';
import type { Hash } from 'node:crypto';
import { StagedrootError } from '../../errors.js';
import { fileSize, PartialFile } from '../../fs/trees/fetch-file.js';
import { digestOf, hasherFor } from '../oci/digest.js';
import { INDEX_TYPES, MANIFEST_TYPES } from '../oci/media-types.js';
import { hostPlatform, platformMatches, showPlatform, type Platform } from '../oci/platform.js';
import { descriptor, MAX_JSON_BYTES, type Descriptor } from '../oci/read-blob.js';
import { AUTH_FILES, credentialsFor, type AuthFile, type Credentials } from './auth-file.js';
import { drain, isTlsError, parseChallenge, readBody, retryAfterMs, send, StallError } from './http.js';
import { formatReference, registryEndpoint, type ImageReference } from './reference.js';
import { tlsFor, type TlsMaterial, type TlsOptions } from './tls-files.js';

/** What a registry is asked for a manifest: every kind stagedroot reads (the distribution spec's content negotiation). */
export const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');

export interface RegistryClientOptions extends TlsOptions {
  /** The credentials file found by findAuthFile (null: anonymous). */
  auth?: AuthFile | null;
  /** Plain http instead of https (a registry marked `insecure`; the tests' fault server). */
  plainHttp?: boolean;
  /** Attempts per request after the first, for a cut connection, a stall, 429, 5xx (default 4). */
  retries?: number;
  /** The first wait between attempts, doubled each time (default 500 ms). */
  backoffMs?: number;
  /** The longest `Retry-After` honoured as it is (default 60 s); a longer one waits this long. */
  maxRetryAfterMs?: number;
  /** No bytes for this long: the attempt fails (default 30 s). */
  stallMs?: number;
  /** Redirects followed per request (default 10). */
  maxRedirects?: number;
  /** The platform picked from an index (default: linux and this host's architecture). */
  platform?: Platform;
  /** The host to connect to instead of the reference's registry (a mirror, the tests' proxy). */
  endpoint?: string;
  /**
   * registries.conf's `insecure`: TLS certificates are not verified, and a registry that
   * answers https with plain http is spoken to in plain http.
   */
  insecure?: boolean;
}

export interface Manifest {
  digest: string;
  mediaType: string;
  bytes: Buffer;
  doc: Record<string, unknown>;
}

export interface ResolvedManifest {
  /** The image manifest for the platform. */
  manifest: Manifest;
  /** The index the reference named, when it named one. */
  index?: Manifest;
  /** The platform's descriptor in the index (or none). */
  platform?: string;
  config: Descriptor;
  layers: Descriptor[];
}

/** How a blob came to be in place: fetched now (how many bytes), or already whole there. */
export interface BlobFetch {
  fetched: number;
  cached: number;
  /** Whether an earlier fetch's bytes were resumed (a 206 answer to a Range request). */
  resumed: boolean;
}

/** Bytes between two progress reports of a blob. */
const PROGRESS_STEP = 1024 * 1024;

/** A blob on its way: bytes in place so far (fetched now, or kept from an earlier fetch and resumed), of its size. */
export interface BlobProgress {
  bytes: number;
  size: number;
  fetched: number;
  cached: number;
}

const RETRY_STATUS = new Set([429, 500, 502, 503, 504]);
const wait = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Token {
  value: string;
  expires: number;
}

/**
 * The distribution API (distribution-spec, "pull") for one repository: GET /v2/,
 * manifests by tag or digest, blobs. Authentication as a registry asks for it (a 401's
 * `WWW-Authenticate`): Basic with the credentials file's entry, or a Bearer token from
 * the challenge's realm (service, scope `repository:REPO:pull`), cached until its
 * `expires_in`. Redirects are followed, with `Authorization` sent only to the
 * registry's own origin. Every error names the image (and the blob) and the cause,
 * never a credential.
 */
export class RegistryClient {
  private base: string;
  readonly image: string;
  private tls: Promise<TlsMaterial> | undefined;
  private o: Required<Pick<RegistryClientOptions, 'retries' | 'backoffMs' | 'maxRetryAfterMs' | 'stallMs' | 'maxRedirects'>>;
  private readonly creds: Credentials | null;
  /** How the registry asked to be authenticated (from its last 401), or null before any. */
  private challenge: { scheme: string; params: Record<string, string> } | null = null;
  private readonly tokens = new Map<string, Token>();

  constructor(
    readonly ref: ImageReference,
    private readonly opts: RegistryClientOptions = {},
  ) {
    const host = opts.endpoint ?? registryEndpoint(ref.registry);
    this.base = `${opts.plainHttp ? 'http' : 'https'}://${host}`;
    this.image = formatReference(ref);
    this.creds = credentialsFor(opts.auth ?? null, ref);
    this.o = { retries: opts.retries ?? 4, backoffMs: opts.backoffMs ?? 500, maxRetryAfterMs: opts.maxRetryAfterMs ?? 60_000, stallMs: opts.stallMs ?? 30_000, maxRedirects: opts.maxRedirects ?? 10 };
  }

  /** The origin requests go to ("https://127.0.0.1:5000"; http:// once an insecure registry answered so). */
  get origin(): string {
    return this.base;
  }

  /** Attempts per request from now on (a mirror resolves with none, then fetches its layers with the usual ones). */
  setRetries(n: number | undefined): void {
    this.o = { ...this.o, retries: n ?? 4 };
  }

  /** Which credentials are used, for messages: the file (never its content), or none. */
  get credentialsUsed(): string {
    if (this.opts.auth == null) return `no credentials (none of ${AUTH_FILES.join(', ')} exists)`;
    return this.creds ? `the credentials for ${this.ref.registry} in ${this.opts.auth.path}` : `no credentials (${this.opts.auth.path} has none for ${this.ref.registry})`;
  }

  private fail(why: string, what?: string, cause?: unknown): never {
    throw new StagedrootError('REGISTRY_FAILED', `${this.image}${what ? `: ${what}` : ''}: ${why}`, { path: this.image, ...(cause === undefined ? {} : { cause }) });
  }

  private tlsMaterial(): Promise<TlsMaterial> {
    return (this.tls ??= tlsFor(this.opts.endpoint ?? this.ref.registry, this.opts));
  }

  /** GET /v2/: the registry answers (200, or 401 with its challenge, which authenticates). */
  async ping(): Promise<void> {
    const res = await this.request('/v2/', { what: 'GET /v2/' });
    drain(res);
    if (res.statusCode !== 200) this.fail(`GET /v2/ answered ${res.statusCode}`, undefined);
  }

  /**
   * A request to the registry, its answer once its headers are in: redirects followed,
   * authentication done, 429 and 5xx retried (Retry-After honoured), a refused or cut
   * connection and a stall retried with backoff. Any other status is the caller's.
   */
  async request(path: string, r: { what: string; accept?: string; range?: number; method?: 'GET' | 'HEAD' }): Promise<IncomingMessage> {
    let authTried = false;
    for (let attempt = 0; ; attempt++) {
      const again = async (why: string, ms?: number, cause?: unknown): Promise<void> => {
        if (attempt >= this.o.retries) this.fail(`${why} (after ${attempt + 1} attempts)`, r.what, cause);
        await wait(Math.min(ms ?? this.o.backoffMs * 2 ** attempt, this.o.maxRetryAfterMs));
      };
      let url = new URL(path, this.origin);
      let res: IncomingMessage;
      try {
        for (let hops = 0; ; hops++) {
          const sameOrigin = url.origin === new URL(this.origin).origin;
          const headers: Record<string, string> = { ...(r.accept ? { accept: r.accept } : {}), ...(r.range ? { range: `bytes=${r.range}-` } : {}) };
          if (sameOrigin) {
            const a = await this.authorization();
            if (a !== null) headers.authorization = a;
          }
          res = await send({ url, method: r.method, headers, stallMs: this.o.stallMs, ...(url.protocol === 'https:' ? { tls: await this.tlsMaterial(), insecure: this.opts.insecure === true } : {}) });
          const loc = res.headers.location;
          if (res.statusCode !== undefined && [301, 302, 303, 307, 308].includes(res.statusCode) && loc !== undefined) {
            drain(res);
            if (hops >= this.o.maxRedirects) this.fail(`more than ${this.o.maxRedirects} redirects (a redirect loop?), the last to ${new URL(loc, url).origin}`, r.what);
            url = new URL(loc, url);
            continue;
          }
          break;
        }
      } catch (err) {
        if (err instanceof StagedrootError) throw err;
        if (this.opts.insecure && url.origin === this.base && this.base.startsWith('https:') && (isTlsError(err) || (err as { code?: string }).code === 'EPROTO')) {
          // An insecure registry that speaks plain http (what containers/image falls back to).
          this.base = `http:${this.base.slice('https:'.length)}`;
          attempt--;
          continue;
        }
        if (isTlsError(err)) this.fail(`the TLS certificate of ${url.host} cannot be verified: ${(err as { code?: string }).code ?? (err as Error).message} (its CA goes in ${this.opts.certsDir ?? '/etc/containers/certs.d'}/${this.opts.endpoint ?? this.ref.registry}/*.crt)`, r.what, err);
        const why = err instanceof StallError ? `${url.host} sent ${err.message}` : `${url.host}: ${(err as { code?: string }).code ?? (err as Error).message}`;
        await again(why, undefined, err);
        continue;
      }
      const status = res.statusCode ?? 0;
      if (status === 401) {
        const ch = parseChallenge(headerOf(res, 'www-authenticate'));
        drain(res);
        if (!authTried && ch !== null && (ch.scheme === 'bearer' || ch.scheme === 'basic')) {
          authTried = true;
          this.challenge = ch;
          if (ch.scheme === 'bearer') this.tokens.clear();
          attempt--; // authenticating is not a failed attempt
          continue;
        }
        this.fail(this.creds ? `the registry refused ${this.credentialsUsed} (401 Unauthorized)` : `the registry needs credentials (401 Unauthorized) and there are ${this.credentialsUsed}`, r.what);
      }
      if (RETRY_STATUS.has(status)) {
        drain(res);
        await again(`the registry answered ${status}`, retryAfterMs(headerOf(res, 'retry-after')));
        continue;
      }
      return res;
    }
  }

  /** The Authorization header the registry asked for (Basic, or a Bearer token), or null. */
  private async authorization(): Promise<string | null> {
    const ch = this.challenge;
    if (ch === null) return null;
    if (ch.scheme === 'basic') return this.creds ? basic(this.creds) : null;
    const scope = ch.params.scope ?? `repository:${this.ref.repository}:pull`;
    const key = `${ch.params.realm} ${ch.params.service ?? ''} ${scope}`;
    const cached = this.tokens.get(key);
    if (cached !== undefined && cached.expires > Date.now()) return `Bearer ${cached.value}`;
    const t = await this.fetchToken(ch.params, scope);
    this.tokens.set(key, t);
    return `Bearer ${t.value}`;
  }

  /** A token from the challenge's realm (the token authentication spec: GET realm?service&scope, Basic credentials when there are). */
  private async fetchToken(p: Record<string, string>, scope: string): Promise<Token> {
    if (p.realm === undefined) this.fail('the registry asked for a Bearer token without a realm to get it from', 'authentication');
    let realm: URL;
    try {
      realm = new URL(p.realm);
    } catch {
      return this.fail(`the token realm ${JSON.stringify(p.realm)} is not a URL`, 'authentication');
    }
    if (p.service !== undefined) realm.searchParams.set('service', p.service);
    realm.searchParams.set('scope', scope);
    const what = `the token from ${realm.origin}${realm.pathname}`;
    let body: Buffer | null = null;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await send({ url: realm, headers: this.creds ? { authorization: basic(this.creds) } : {}, stallMs: this.o.stallMs, ...(realm.protocol === 'https:' ? { tls: await this.tlsMaterial(), insecure: this.opts.insecure === true } : {}) });
        const status = res.statusCode ?? 0;
        if (status === 401 || status === 403) {
          drain(res);
          this.fail(`the token service refused ${this.credentialsUsed} (${status})`, what);
        }
        if (RETRY_STATUS.has(status) && attempt < this.o.retries) {
          drain(res);
          await wait(Math.min(retryAfterMs(headerOf(res, 'retry-after')) ?? this.o.backoffMs * 2 ** attempt, this.o.maxRetryAfterMs));
          continue;
        }
        if (status !== 200) {
          drain(res);
          this.fail(`the token service answered ${status}`, what);
        }
        body = await readBody(res, 1024 * 1024);
        break;
      } catch (err) {
        if (err instanceof StagedrootError) throw err;
        if (isTlsError(err) || attempt >= this.o.retries) this.fail(`${realm.host}: ${(err as { code?: string }).code ?? (err as Error).message}`, what, err);
        await wait(this.o.backoffMs * 2 ** attempt);
      }
    }
    let doc: { token?: unknown; access_token?: unknown; expires_in?: unknown };
    try {
      doc = JSON.parse(body?.toString('utf8') ?? '');
    } catch {
      return this.fail('the token service sent no JSON', what);
    }
    const value = typeof doc.token === 'string' && doc.token !== '' ? doc.token : typeof doc.access_token === 'string' ? doc.access_token : '';
    if (value === '') this.fail('the token service sent no token', what);
    // The spec's default lifetime is 60 s; a few seconds are kept back for the request's own time.
    const secs = typeof doc.expires_in === 'number' && doc.expires_in > 0 ? doc.expires_in : 60;
    return { value, expires: Date.now() + Math.max(0, secs - 5) * 1000 };
  }

  /**
   * A manifest or index by tag or digest, read whole (at most 4 MiB) and checked: by
   * digest, its bytes hash to it; by tag, its digest is what `Docker-Content-Digest`
   * says when the registry says; its media type one stagedroot reads.
   */
  async manifest(reference: string, what = 'the manifest'): Promise<Manifest> {
    const m = await this.manifestIfAny(reference, what);
    if (m === null) this.fail(`the registry has no ${reference.includes(':') ? `manifest ${reference}` : `tag ${reference}`} (404)`, reference.includes(':') ? `${what} ${reference}` : `${what} (tag ${reference})`);
    return m;
  }

  /** manifest(), but a 404 (no such tag or manifest) is null: for what may not exist (a sigstore attachment's tag). */
  async manifestIfAny(reference: string, what = 'the manifest'): Promise<Manifest | null> {
    const byDigest = reference.includes(':');
    const label = byDigest ? `${what} ${reference}` : `${what} (tag ${reference})`;
    const res = await this.request(`/v2/${this.ref.repository}/manifests/${reference}`, { what: label, accept: MANIFEST_ACCEPT });
    if (res.statusCode === 404) {
      drain(res);
      return null;
    }
    if (res.statusCode !== 200) {
      drain(res);
      this.fail(`the registry answered ${res.statusCode}`, label);
    }
    const declared = Number(headerOf(res, 'content-length') ?? NaN);
    if (declared > MAX_JSON_BYTES) {
      drain(res);
      throw new StagedrootError('UNSAFE_ENTRY', `${this.image}: ${label} is ${declared} bytes (limit ${MAX_JSON_BYTES} for an image document)`, { path: this.image });
    }
    const bytes = await this.body(res, label);
    if (bytes === null) throw new StagedrootError('UNSAFE_ENTRY', `${this.image}: ${label} is more than ${MAX_JSON_BYTES} bytes (the limit for an image document)`, { path: this.image });
    const alg = byDigest ? reference.slice(0, reference.indexOf(':')) : 'sha256';
    const digest = digestOf(bytes, alg);
    if (byDigest && digest !== reference) throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} does not match its digest: its content hashes to ${digest}`, { path: reference, digest: reference });
    const said = headerOf(res, 'docker-content-digest');
    if (!byDigest && said !== undefined && said.startsWith('sha256:') && said !== digest) throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} hashes to ${digest}, not the ${said} the registry's Docker-Content-Digest says`, { path: said });
    let doc: unknown;
    try {
      doc = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} (${digest}) is not JSON`, { path: digest });
    }
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} (${digest}) is not a JSON object`, { path: digest });
    const d = doc as Record<string, unknown>;
    const contentType = headerOf(res, 'content-type')?.split(';')[0]!.trim();
    const mediaType = typeof d.mediaType === 'string' ? d.mediaType : contentType ?? '';
    if (!INDEX_TYPES.has(mediaType) && !MANIFEST_TYPES.has(mediaType)) {
      throw new StagedrootError('SOURCE_UNSUPPORTED', `${this.image}: ${label} (${digest}) has the media type ${JSON.stringify(mediaType)}, which is no OCI or Docker v2 manifest or index (schema 1 and other kinds are not read)`, { path: digest });
    }
    return { digest, mediaType, bytes, doc: d };
  }

  private async body(res: IncomingMessage, label: string): Promise<Buffer | null> {
    try {
      return await readBody(res, MAX_JSON_BYTES);
    } catch (err) {
      return this.fail(err instanceof StallError ? `the registry sent ${err.message}` : `the connection failed: ${(err as { code?: string }).code ?? (err as Error).message}`, label, err);
    }
  }

  /**
   * The reference's image manifest: by its digest or tag, resolved once; an index
   * (OCI or a Docker manifest list) gives the manifest for the platform (its
   * descriptor's `platform`), fetched by digest.
   */
  async resolve(reference = this.ref.digest ?? this.ref.tag ?? 'latest'): Promise<ResolvedManifest> {
    const top = await this.manifest(reference);
    let manifest = top;
    let index: Manifest | undefined;
    let platform: string | undefined;
    if (INDEX_TYPES.has(top.mediaType)) {
      index = top;
      const where = `${this.image}: the index ${top.digest}`;
      if (!Array.isArray(top.doc.manifests)) throw new StagedrootError('SOURCE_CORRUPT', `${where} has no manifests list`, { path: top.digest });
      const cands = (top.doc.manifests as unknown[]).map((m, i) => descriptor(m, `manifests[${i}]`, where));
      const want = this.opts.platform ?? hostPlatform();
      const manifests = cands.filter((d) => MANIFEST_TYPES.has(d.mediaType));
      const chosen = manifests.find((d) => d.platform?.os !== undefined && d.platform.architecture !== undefined && platformMatches(d.platform, want)) ?? (manifests.length === 1 && manifests[0]!.platform?.architecture === undefined ? manifests[0] : undefined);
      if (chosen === undefined) {
        const seen = cands.map((d) => `${d.platform ? showPlatform(d.platform) : 'no platform'} (${d.digest})`);
        throw new StagedrootError('SOURCE_UNSUPPORTED', `${where} has no manifest for ${showPlatform(want)}: it has ${seen.join(', ') || 'none'} (choose one with --platform)`, { path: top.digest });
      }
      if (chosen.size > MAX_JSON_BYTES) throw new StagedrootError('UNSAFE_ENTRY', `${where}: the manifest ${chosen.digest} is ${chosen.size} bytes (limit ${MAX_JSON_BYTES})`, { path: chosen.digest });
      manifest = await this.manifest(chosen.digest, `the manifest for ${showPlatform(chosen.platform ?? want)}`);
      if (manifest.bytes.length !== chosen.size) throw new StagedrootError('SOURCE_CORRUPT', `${where}: the manifest ${chosen.digest} is ${manifest.bytes.length} bytes, not the ${chosen.size} the index declares`, { path: chosen.digest });
      if (!MANIFEST_TYPES.has(manifest.mediaType)) throw new StagedrootError('SOURCE_UNSUPPORTED', `${where}: ${chosen.digest} is a nested index, not an image manifest`, { path: chosen.digest });
      platform = chosen.platform ? showPlatform(chosen.platform) : undefined;
    }
    const where = `${this.image}: the manifest ${manifest.digest}`;
    const config = descriptor(manifest.doc.config, 'the config', where);
    if (!Array.isArray(manifest.doc.layers)) throw new StagedrootError('SOURCE_CORRUPT', `${where} has no layers list`, { path: manifest.digest });
    const layers = (manifest.doc.layers as unknown[]).map((l, i, all) => descriptor(l, `layer ${i + 1} of ${all.length}`, where));
    return { manifest, ...(index ? { index } : {}), ...(platform ? { platform } : {}), config, layers };
  }

  /**
   * A small blob read whole into memory (a signature's payload): at most `max` bytes,
   * checked against its descriptor's size and digest (SOURCE_CORRUPT when they differ,
   * UNSAFE_ENTRY over `max`).
   */
  async smallBlob(d: { digest: string; size: number }, what: string, max: number): Promise<Buffer> {
    const label = `blob ${d.digest} (${what})`;
    if (d.size > max) throw new StagedrootError('UNSAFE_ENTRY', `${this.image}: ${label} is ${d.size} bytes (limit ${max})`, { path: d.digest });
    const res = await this.request(`/v2/${this.ref.repository}/blobs/${d.digest}`, { what: label });
    if (res.statusCode !== 200) {
      drain(res);
      this.fail(res.statusCode === 404 ? 'the registry has no such blob (404)' : `the registry answered ${res.statusCode}`, label);
    }
    let bytes: Buffer | null;
    try {
      bytes = await readBody(res, d.size);
    } catch (err) {
      return this.fail(err instanceof StallError ? `the registry sent ${err.message}` : `the connection failed: ${(err as { code?: string }).code ?? (err as Error).message}`, label, err);
    }
    if (bytes === null || bytes.length !== d.size) throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} is ${bytes === null ? 'longer' : `${bytes.length} bytes`}, not the ${d.size} bytes its descriptor declares`, { path: d.digest, digest: d.digest });
    const got = digestOf(bytes, d.digest.slice(0, d.digest.indexOf(':')));
    if (got !== d.digest) throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} does not match its digest: its content hashes to ${got}`, { path: d.digest, digest: d.digest });
    return bytes;
  }

  /**
   * A blob into the file `dest`, verified by digest and size as it arrives: streamed
   * into `DEST.partial`, renamed to `dest` only when whole and matching. What an
   * earlier, interrupted fetch left in `DEST.partial` is hashed again and resumed with a
   * `Range` request; a `200` to it starts over. A blob longer than declared stops at
   * the first extra byte; bytes that do not match the digest are removed (SOURCE_CORRUPT,
   * exit 3); a cut connection or a stall keeps what came and resumes, up to the retries.
   */
  async fetchBlob(d: { digest: string; size: number }, dest: string, what: string, onProgress?: (p: BlobProgress) => void): Promise<BlobFetch> {
    const label = `blob ${d.digest} (${what})`;
    if ((await fileSize(dest)) === d.size) return { fetched: 0, cached: d.size, resumed: false };
    const part = await PartialFile.open(dest);
    const corrupt = async (why: string): Promise<never> => {
      await part.discard();
      throw new StagedrootError('SOURCE_CORRUPT', `${this.image}: ${label} ${why}`, { path: d.digest, digest: d.digest });
    };
    try {
      let hash: Hash = hasherFor(d.digest);
      if (part.size > d.size) await part.truncate();
      const kept = part.size;
      for await (const c of part.chunks()) hash.update(c);
      let fetched = 0;
      let resumed = false;
      for (let attempt = 0; part.size < d.size; attempt++) {
        const from = part.size;
        const res = await this.request(`/v2/${this.ref.repository}/blobs/${d.digest}`, { what: label, ...(from > 0 ? { range: from } : {}) });
        const status = res.statusCode ?? 0;
        if (status === 404) {
          drain(res);
          this.fail('the registry has no such blob (404)', label);
        }
        if (status === 206 && from > 0) {
          const cr = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(headerOf(res, 'content-range') ?? '');
          if (!cr || Number(cr[1]) !== from) {
            // A range not the one asked for: start over rather than splice.
            drain(res);
            await part.truncate();
            hash = hasherFor(d.digest);
            continue;
          }
          resumed = true;
        } else if (status === 200) {
          if (from > 0) {
            await part.truncate(); // the registry ignored the Range: the whole blob comes again
            hash = hasherFor(d.digest);
          }
          const len = headerOf(res, 'content-length');
          if (len !== undefined && Number(len) !== d.size) {
            drain(res);
            return await corrupt(`is ${len} bytes by the registry's Content-Length, not the ${d.size} its descriptor declares`);
          }
        } else {
          drain(res);
          this.fail(`the registry answered ${status}`, label);
        }
        try {
          for await (const c of res as AsyncIterable<Buffer>) {
            if (part.size + c.length > d.size) {
              res.destroy();
              return await corrupt(`is larger than the ${d.size} bytes its descriptor declares`);
            }
            hash.update(c);
            part.appendSync(c);
            fetched += c.length;
            if (onProgress !== undefined && Math.floor((part.size - c.length) / PROGRESS_STEP) !== Math.floor(part.size / PROGRESS_STEP)) onProgress({ bytes: part.size, size: d.size, fetched, cached: resumed ? kept : 0 });
          }
        } catch (err) {
          if (err instanceof StagedrootError) throw err;
          res.destroy();
          const why = err instanceof StallError ? `the registry sent ${err.message} at byte ${part.size} of ${d.size}` : `the connection was cut at byte ${part.size} of ${d.size} (${(err as { code?: string }).code ?? (err as Error).message})`;
          if (attempt >= this.o.retries) this.fail(`${why} (after ${attempt + 1} attempts; the ${part.size} bytes fetched are kept for the next try)`, label, err);
          await wait(this.o.backoffMs * 2 ** attempt);
          continue;
        }
        if (part.size < d.size) {
          if (attempt >= this.o.retries) this.fail(`the registry ended the blob at byte ${part.size} of ${d.size} (after ${attempt + 1} attempts; the bytes fetched are kept for the next try)`, label);
          await wait(this.o.backoffMs * 2 ** attempt);
        }
      }
      const got = `${d.digest.slice(0, d.digest.indexOf(':'))}:${hash.digest('hex')}`;
      if (got !== d.digest) return await corrupt(`does not match its digest: its content hashes to ${got}`);
      await part.commit(dest);
      return { fetched, cached: resumed ? kept : 0, resumed };
    } finally {
      await part.close();
    }
  }
}

function headerOf(res: IncomingMessage, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function basic(c: Credentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}
