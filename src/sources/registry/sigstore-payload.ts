import { constants, createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { describeDuplicate, duplicateKey } from './strict-json.js';
import { isRecord } from '../../util/is-record.js';

/** A sigstore signature attachment's layer (cosign's "simple signing" payload). */
export const SIGSTORE_SIGNATURE_MEDIA_TYPE = 'application/vnd.dev.cosign.simplesigning.v1+json';
/** The layer annotation holding the base64 signature of the layer's bytes. */
export const SIGSTORE_SIGNATURE_ANNOTATION = 'dev.cosignproject.cosign/signature';
/** `critical.type` of a cosign payload. */
export const SIGSTORE_SIGNATURE_TYPE = 'cosign container image signature';

/** A public key of a sigstoreSigned requirement: its name (the file, or keyData), the key, and its id (the sha256 of its SubjectPublicKeyInfo). */
export interface SigstoreKey {
  name: string;
  key: KeyObject;
  id: string;
}

/**
 * A PEM public key as sigstore's LoadVerifier takes it: ECDSA (any curve, the signature
 * over SHA-256, DER-encoded, as cosign makes it), RSA (PKCS#1 v1.5 over SHA-256) or
 * Ed25519 (over the payload itself). Anything else throws, saying what it is.
 */
export function sigstoreKey(pem: Buffer, name: string): SigstoreKey {
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem, format: 'pem' });
  } catch (err) {
    throw new Error(`${name} is not a PEM public key (${(err as Error).message})`);
  }
  const t = key.asymmetricKeyType;
  if (t !== 'ec' && t !== 'rsa' && t !== 'ed25519') throw new Error(`${name} is a ${t ?? 'unknown'} key: sigstore signatures are verified with ECDSA, RSA or Ed25519 keys`);
  return { name, key, id: `sha256:${createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex')}` };
}

/** Whether `base64` (standard base64, padded) is a signature of `payload` by `k`. */
export function verifySigstoreSignature(k: SigstoreKey, payload: Buffer, base64: string): boolean {
  if (base64.length === 0 || base64.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) return false;
  const sig = Buffer.from(base64, 'base64');
  try {
    switch (k.key.asymmetricKeyType) {
      case 'ec':
        return verify('sha256', payload, { key: k.key, dsaEncoding: 'der' }, sig);
      case 'rsa':
        return verify('sha256', payload, { key: k.key, padding: constants.RSA_PKCS1_PADDING }, sig);
      case 'ed25519':
        return verify(null, payload, k.key, sig);
      default:
        return false;
    }
  } catch {
    return false; // a malformed signature (a DER that does not parse) is no signature
  }
}

/** What a cosign payload claims: the manifest digest it signs and the reference it names. */
export interface SigstoreClaim {
  digest: string;
  reference: string;
}

/** `o` has exactly the fields `names` (containers/image reads a payload's objects with exactly the fields it knows). */
function exactly(o: unknown, names: string[], what: string): string | null {
  if (!isRecord(o)) return `${what} is not a JSON object`;
  const keys = Object.keys(o);
  const missing = names.filter((n) => !(n in o));
  const extra = keys.filter((k) => !names.includes(k));
  if (missing.length > 0) return `${what} has no ${missing.join(', ')}`;
  if (extra.length > 0) return `${what} has unknown fields ${extra.join(', ')}`;
  return null;
}

/**
 * A cosign payload read as containers/image reads it (signature/internal/sigstore_payload.go):
 * `{"critical": {"type": "cosign container image signature", "image":
 * {"docker-manifest-digest": D}, "identity": {"docker-reference": R}}, "optional": …}`,
 * each object with exactly those fields, `optional` null or an object (its `creator` a
 * string, its `timestamp` an integer when present), and none of these objects repeating a
 * key (JSON.parse would keep the last; the values inside `optional` are not checked, as
 * there). Returns the claim, or why it is none.
 */
export function parseSigstorePayload(payload: Buffer): SigstoreClaim | { why: string } {
  const text = payload.toString('utf8');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { why: 'is not JSON' };
  }
  const dup = duplicateKey(text, (p) => p[0] !== 'optional' || p.length === 1);
  if (dup !== null) return { why: `has ${describeDuplicate(dup)}` };
  const why = exactly(doc, ['critical', 'optional'], 'the payload');
  if (why) return { why };
  const { critical, optional } = doc as Record<string, unknown>;
  const w2 = exactly(critical, ['type', 'image', 'identity'], 'critical');
  if (w2) return { why: w2 };
  const c = critical as Record<string, unknown>;
  if (c.type !== SIGSTORE_SIGNATURE_TYPE) return { why: `is of type ${JSON.stringify(c.type)}, not "${SIGSTORE_SIGNATURE_TYPE}"` };
  const w3 = exactly(c.image, ['docker-manifest-digest'], 'critical.image') ?? exactly(c.identity, ['docker-reference'], 'critical.identity');
  if (w3) return { why: w3 };
  const digest = (c.image as Record<string, unknown>)['docker-manifest-digest'];
  const reference = (c.identity as Record<string, unknown>)['docker-reference'];
  if (typeof digest !== 'string' || !/^sha256:[0-9a-f]{64}$|^sha512:[0-9a-f]{128}$/.test(digest)) return { why: `names the digest ${JSON.stringify(digest)}, which is no sha256 or sha512 digest` };
  if (typeof reference !== 'string') return { why: 'names no docker-reference string' };
  if (optional !== null) {
    if (!isRecord(optional)) return { why: 'has an optional that is neither null nor an object' };
    if (optional.creator !== undefined && typeof optional.creator !== 'string') return { why: 'has an optional.creator that is not a string' };
    if (optional.timestamp !== undefined && !Number.isSafeInteger(optional.timestamp)) return { why: 'has an optional.timestamp that is not an integer' };
  }
  return { digest, reference };
}
