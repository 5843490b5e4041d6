import { StagedrootError } from '../../errors.js';
import { readSmallFile } from '../../fs/trees/fetch-file.js';
import { formatReference, parsePullspec, type ImageReference } from './reference.js';
import { describeDuplicate, duplicateKey } from './strict-json.js';
import { isRecord } from '../../util/is-record.js';

/** containers-policy.json(5): what images may be pulled, and whose signatures they need. */
export const POLICY_FILE = '/etc/containers/policy.json';

const MAX_POLICY = 4 * 1024 * 1024;

/** How a signature's claimed identity must relate to the reference pulled (containers-policy.json's signedIdentity). */
export type SignedIdentity =
  | { type: 'matchRepoDigestOrExact' }
  | { type: 'matchRepository' }
  | { type: 'matchExact' }
  | { type: 'exactReference'; dockerReference: string }
  | { type: 'exactRepository'; dockerRepository: string };

export type Requirement =
  | { type: 'insecureAcceptAnything' }
  | { type: 'reject' }
  | { type: 'signedBy'; keyPaths: string[]; keyData: Buffer[]; signedIdentity: SignedIdentity }
  | {
      type: 'sigstoreSigned';
      /** The public keys (PEM) as paths or as data: any one of them signing is enough. */
      keyPaths: string[];
      keyData: Buffer[];
      signedIdentity: SignedIdentity;
      /** Rekor's public keys (PEM, ECDSA), as paths or as data: when any is given, each signature needs a Rekor SET by one of them. */
      rekorKeyPaths: string[];
      rekorKeyData: Buffer[];
      /** What it asks for that stagedroot does not verify (fulcio, pki): the requirement is refused where it applies. */
      unsupported: string[];
    };

export interface Policy {
  file: string;
  default: Requirement[];
  /** transports.docker: scope → requirements. */
  docker: Map<string, Requirement[]>;
}

function bad(file: string, why: string): never {
  throw new StagedrootError('SIGNATURE_INVALID', `${file}: ${why}`, { path: file });
}

/**
 * The fields each object of the policy format may have (containers/image's
 * policy_config.go and policy_config_sigstore.go): as there, a field it does not define
 * is an error, not ignored (a misspelt field must not silently loosen a requirement).
 */
const FIELDS = {
  insecureAcceptAnything: ['type'],
  reject: ['type'],
  signedBy: ['type', 'keyType', 'keyPath', 'keyPaths', 'keyData', 'signedIdentity'],
} as const;

/** The fields of each signedIdentity (containers/image: exactly these, the second one required). */
const IDENTITY_FIELDS = {
  matchRepoDigestOrExact: ['type'],
  matchRepository: ['type'],
  matchExact: ['type'],
  exactReference: ['type', 'dockerReference'],
  exactRepository: ['type', 'dockerRepository'],
} as const;

/** `o` (`what` at `where`) has no field but `allowed`, else SIGNATURE_INVALID naming the file, where, what and the fields. */
function onlyFields(file: string, where: string, what: string, o: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(o).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) bad(file, `${where}: ${what} has unknown field${unknown.length === 1 ? '' : 's'} ${unknown.join(', ')}`);
}

function requirement(file: string, where: string, r: unknown): Requirement {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) bad(file, `${where} is not an object`);
  const o = r as Record<string, unknown>;
  switch (o.type) {
    case 'insecureAcceptAnything':
    case 'reject':
      onlyFields(file, where, o.type, o, FIELDS[o.type]);
      return { type: o.type };
    case 'sigstoreSigned':
      return sigstoreSigned(file, where, o);
    case 'signedBy': {
      onlyFields(file, where, 'signedBy', o, FIELDS.signedBy);
      if (o.keyType !== 'GPGKeys') bad(file, `${where}: keyType ${JSON.stringify(o.keyType)} (only GPGKeys is defined)`);
      const keys = keySources(file, where, 'signedBy', o, ['keyPath', 'keyPaths', 'keyData']);
      if (keys.given.length === 0) bad(file, `${where}: signedBy needs one of keyPath, keyPaths, keyData`);
      return { type: 'signedBy', keyPaths: keys.paths, keyData: keys.data, signedIdentity: identity(file, where, o.signedIdentity) };
    }
    default:
      return bad(file, `${where}: unknown requirement type ${JSON.stringify(o.type)}`);
  }
}

/** Fields of sigstoreSigned (containers-policy.json(5)) for keyless signing (certificates from Fulcio or another CA), which stagedroot does not verify. */
const SIGSTORE_UNSUPPORTED = ['fulcio', 'pki'];

/** One of `names` (a path, paths, data and, for sigstoreSigned, datas) at most: the paths, and the data decoded from base64. */
function keySources(file: string, where: string, what: string, o: Record<string, unknown>, names: [string, string, string, string?]): { paths: string[]; data: Buffer[]; given: string[] } {
  const [path, paths, data, datas] = names;
  const strings = (v: unknown): v is string[] => Array.isArray(v) && v.length > 0 && v.every((p) => typeof p === 'string');
  const all = names.filter((k): k is string => k !== undefined);
  const given = all.filter((k) => o[k] !== undefined);
  if (given.length > 1) bad(file, `${where}: ${what} has ${given.join(' and ')}: it takes exactly one of ${all.join(', ')}`);
  for (const k of [path, data]) if (o[k] !== undefined && typeof o[k] !== 'string') bad(file, `${where}: ${k} is not a string`);
  for (const k of [paths, datas]) if (k !== undefined && o[k] !== undefined && !strings(o[k])) bad(file, `${where}: ${k} is not a non-empty array of strings`);
  return {
    paths: typeof o[path] === 'string' ? [o[path] as string] : ((o[paths] as string[] | undefined) ?? []),
    data: (typeof o[data] === 'string' ? [o[data] as string] : datas !== undefined ? ((o[datas] as string[] | undefined) ?? []) : []).map((d) => Buffer.from(d, 'base64')),
    given,
  };
}

const SIGSTORE_FIELDS = ['type', 'keyPath', 'keyPaths', 'keyData', 'keyDatas', 'rekorPublicKeyPath', 'rekorPublicKeyPaths', 'rekorPublicKeyData', 'rekorPublicKeyDatas', 'signedIdentity', ...SIGSTORE_UNSUPPORTED];

function sigstoreSigned(file: string, where: string, o: Record<string, unknown>): Requirement {
  // As containers/image: a field it does not know is an error (a misspelt rekorPublicKeyPath must not turn the log check off).
  onlyFields(file, where, 'sigstoreSigned', o, SIGSTORE_FIELDS);
  const keys = keySources(file, where, 'sigstoreSigned', o, ['keyPath', 'keyPaths', 'keyData', 'keyDatas']);
  const rekor = keySources(file, where, 'sigstoreSigned', o, ['rekorPublicKeyPath', 'rekorPublicKeyPaths', 'rekorPublicKeyData', 'rekorPublicKeyDatas']);
  const unsupported = SIGSTORE_UNSUPPORTED.filter((k) => o[k] !== undefined);
  if (keys.given.length === 0 && unsupported.length === 0) bad(file, `${where}: sigstoreSigned needs one of keyPath, keyPaths, keyData, keyDatas (or fulcio, which stagedroot does not verify)`);
  return { type: 'sigstoreSigned', keyPaths: keys.paths, keyData: keys.data, signedIdentity: identity(file, where, o.signedIdentity), rekorKeyPaths: rekor.paths, rekorKeyData: rekor.data, unsupported };
}

function identity(file: string, where: string, v: unknown): SignedIdentity {
  if (v === undefined) return { type: 'matchRepoDigestOrExact' };
  if (v === null || typeof v !== 'object' || Array.isArray(v)) bad(file, `${where}: signedIdentity is not an object`);
  const o = v as Record<string, unknown>;
  if (typeof o.type === 'string' && Object.hasOwn(IDENTITY_FIELDS, o.type)) onlyFields(file, where, `signedIdentity ${o.type}`, o, IDENTITY_FIELDS[o.type as keyof typeof IDENTITY_FIELDS]);
  switch (o.type) {
    case 'matchRepoDigestOrExact':
    case 'matchRepository':
    case 'matchExact':
      return { type: o.type };
    case 'exactReference':
      if (typeof o.dockerReference !== 'string') bad(file, `${where}: exactReference needs dockerReference`);
      return { type: 'exactReference', dockerReference: o.dockerReference as string };
    case 'exactRepository':
      if (typeof o.dockerRepository !== 'string') bad(file, `${where}: exactRepository needs dockerRepository`);
      return { type: 'exactRepository', dockerRepository: o.dockerRepository as string };
    default:
      return bad(file, `${where}: signedIdentity ${JSON.stringify(o.type)} is not supported (matchRepoDigestOrExact, matchRepository, matchExact, exactReference, exactRepository)`);
  }
}

function requirements(file: string, where: string, v: unknown): Requirement[] {
  if (!Array.isArray(v) || v.length === 0) bad(file, `${where} must be a non-empty array of requirements`);
  return v.map((r, i) => requirement(file, `${where}[${i}]`, r));
}

export function parsePolicy(text: string, file: string): Policy {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    return bad(file, `not JSON: ${(err as Error).message}`);
  }
  // As containers/image's strict parse: a repeated key is an error (JSON.parse would keep the last one).
  const dup = duplicateKey(text);
  if (dup !== null) bad(file, `it has ${describeDuplicate(dup)}`);
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) bad(file, 'a policy is a JSON object');
  const extra = Object.keys(doc).filter((k) => k !== 'default' && k !== 'transports');
  if (extra.length > 0) bad(file, `a policy has default and transports, not ${extra.join(', ')}`);
  const docker = new Map<string, Requirement[]>();
  const t = doc.transports ?? {};
  if (!isRecord(t)) bad(file, 'transports must be an object of transport names to scopes');
  // Other transports (docker-daemon, atomic, …) are kept as containers/image keeps them, unused here: their shape is checked, their requirements are not read.
  for (const [name, scopes] of Object.entries(t)) if (!isRecord(scopes)) bad(file, `transports.${name} must be an object of scopes to requirements`);
  for (const [scope, reqs] of Object.entries((t.docker ?? {}) as Record<string, unknown>)) docker.set(scope, requirements(file, `transports.docker[${JSON.stringify(scope)}]`, reqs));
  return { file, default: requirements(file, 'default', doc.default), docker };
}

/** The policy: `file` (`--policy`) or /etc/containers/policy.json; none there: null (every image is accepted, as before policies). */
export async function loadPolicy(file?: string): Promise<Policy | null> {
  const f = file ?? POLICY_FILE;
  const bytes = await readSmallFile(f, MAX_POLICY);
  if (bytes === null) {
    if (file !== undefined) throw new StagedrootError('USAGE', `The policy ${file} does not exist (or is over 4 MiB)`, { option: 'policy', value: file });
    return null;
  }
  return parsePolicy(bytes.toString('utf8'), f);
}

/**
 * The scopes a docker reference is looked up under, most specific first (containers/image's
 * docker transport): HOST/REPO:TAG or HOST/REPO@DIGEST, HOST/REPO, each parent namespace,
 * HOST, then `*.DOMAIN` for each parent domain of the host, then "" (the transport's default).
 */
export function scopesOf(ref: ImageReference): string[] {
  const name = `${ref.registry}/${ref.repository}`;
  const out = [formatReference(ref), name];
  const parts = name.split('/');
  for (let i = parts.length - 1; i >= 1; i--) out.push(parts.slice(0, i).join('/'));
  const host = ref.registry.replace(/:\d+$/, '');
  const labels = host.split('.');
  for (let i = 1; i < labels.length; i++) out.push(`*.${labels.slice(i).join('.')}`);
  out.push('');
  return [...new Set(out)];
}

/** The requirements for a reference, and the scope they came from (or "default"). */
export function requirementsFor(p: Policy, ref: ImageReference): { scope: string; reqs: Requirement[] } {
  for (const s of scopesOf(ref)) {
    const r = p.docker.get(s);
    if (r !== undefined) return { scope: s === '' ? 'transports.docker[""]' : `transports.docker[${JSON.stringify(s)}]`, reqs: r };
  }
  return { scope: 'default', reqs: p.default };
}

/** Whether a signature's claimed identity (`docker-reference`) is acceptable for `ref` under `si`. */
export function identityMatches(si: SignedIdentity, ref: ImageReference, claimed: string): boolean {
  let c: ImageReference;
  try {
    c = parsePullspec(claimed);
  } catch {
    return false;
  }
  const name = (r: ImageReference) => `${r.registry}/${r.repository}`;
  switch (si.type) {
    case 'matchRepoDigestOrExact':
      return ref.digest !== undefined ? name(c) === name(ref) : formatReference(c) === formatReference(ref);
    case 'matchRepository':
      return name(c) === name(ref);
    case 'matchExact':
      return ref.digest === undefined && formatReference(c) === formatReference(ref);
    case 'exactReference':
      return formatReference(c) === formatReference(parsePullspec(si.dockerReference));
    case 'exactRepository':
      return name(c) === name(parsePullspec(si.dockerRepository));
  }
}
