import { StagedrootError } from '../../errors.js';
import { fileSize, readSmallFile } from '../../fs/trees/fetch-file.js';
import { DEFAULT_REGISTRY, type ImageReference } from './reference.js';

/**
 * Where credentials are looked for when no `--authfile` is given, the first that exists
 * wins: stagedroot's own, then rpm-ostree's (where the machine-config-daemon links the
 * cluster's pull secret), then the kubelet's pull secret itself.
 */
export const AUTH_FILES: readonly string[] = ['/run/stagedroot/auth.json', '/etc/stagedroot/auth.json', '/run/ostree/auth.json', '/etc/ostree/auth.json', '/var/lib/kubelet/config.json'];

/** A credentials file is small; a bigger one is refused, not read. */
const MAX_AUTH_BYTES = 4 * 1024 * 1024;

export interface Credentials {
  username: string;
  password: string;
}

/**
 * A docker `config.json`-format file (containers-auth.json(5); a kubelet pull secret):
 * `{"auths": {"KEY": {"auth": "base64(user:password)"}}}`. Its credentials are never
 * shown: `describe` names the file only.
 */
export interface AuthFile {
  path: string;
  /** By normalised key: "quay.io", "quay.io/org", "quay.io/org/repo". */
  readonly entries: ReadonlyMap<string, Credentials>;
}

/**
 * The credentials file to use: `authfile` when given (it must exist), else the first of
 * `candidates` (AUTH_FILES) that exists, else null (anonymous pulls).
 */
export async function findAuthFile(o: { authfile?: string; candidates?: readonly string[] } = {}): Promise<AuthFile | null> {
  if (o.authfile !== undefined) {
    if ((await fileSize(o.authfile)) === null) throw new StagedrootError('USAGE', `The credentials file ${o.authfile} (--authfile) does not exist`, { option: 'authfile', value: o.authfile });
    return readAuthFile(o.authfile);
  }
  for (const p of o.candidates ?? AUTH_FILES) if ((await fileSize(p)) !== null) return readAuthFile(p);
  return null;
}

/** Reads and checks one credentials file. Nothing of its content goes into an error message. */
export async function readAuthFile(p: string): Promise<AuthFile> {
  const bad = (why: string): never => {
    throw new StagedrootError('REGISTRY_FAILED', `The credentials file ${p} is not in docker config.json format: ${why}`, { path: p });
  };
  const bytes = await readSmallFile(p, MAX_AUTH_BYTES);
  if (bytes === null) return bad('it vanished while being read');
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    // JSON.parse's message quotes the text around the error: it could hold a password.
    return bad('it is not valid JSON');
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return bad('it is not a JSON object');
  const auths = (doc as { auths?: unknown }).auths ?? {};
  if (auths === null || typeof auths !== 'object' || Array.isArray(auths)) return bad('"auths" is not an object');
  const entries = new Map<string, Credentials>();
  for (const [key, v] of Object.entries(auths as Record<string, unknown>)) {
    if (v === null || typeof v !== 'object') return bad(`the entry ${JSON.stringify(key)} is not an object`);
    const e = v as { auth?: unknown; username?: unknown; password?: unknown };
    let c: Credentials | undefined;
    if (typeof e.auth === 'string' && e.auth !== '') {
      const plain = Buffer.from(e.auth, 'base64').toString('utf8');
      const colon = plain.indexOf(':');
      if (colon <= 0) return bad(`the "auth" of ${JSON.stringify(key)} is not base64 of USER:PASSWORD`);
      c = { username: plain.slice(0, colon), password: plain.slice(colon + 1) };
    } else if (typeof e.username === 'string' && typeof e.password === 'string') c = { username: e.username, password: e.password };
    if (c !== undefined) entries.set(normalizeKey(key), c);
  }
  return { path: p, entries };
}

/**
 * A key as containers/image compares it: without a scheme, and a legacy
 * `https://index.docker.io/v1/` (docker login's) as the registry it names.
 */
export function normalizeKey(key: string): string {
  let k = key;
  const scheme = /^https?:\/\//.exec(k);
  if (scheme) {
    k = k.slice(scheme[0].length);
    // a URL key is a registry's: its path (/v1/, /v2/) is not a namespace
    k = k.split('/')[0]!;
  }
  k = k.replace(/\/+$/, '');
  const [host, ...rest] = k.split('/');
  const registry = host === 'index.docker.io' || host === 'registry-1.docker.io' ? DEFAULT_REGISTRY : host!;
  return [registry, ...rest].join('/');
}

/** The credentials for an image: the most specific key first (registry/repo, its namespaces, the registry). */
export function credentialsFor(file: AuthFile | null, ref: Pick<ImageReference, 'registry' | 'repository'>): Credentials | null {
  if (file === null) return null;
  const parts = ref.repository.split('/');
  for (let n = parts.length; n >= 0; n--) {
    const key = [ref.registry, ...parts.slice(0, n)].join('/');
    const c = file.entries.get(key);
    if (c !== undefined) return c;
  }
  return null;
}
