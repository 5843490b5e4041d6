import { verify, type KeyObject } from 'node:crypto';
import { describeDuplicate, duplicateKey } from './strict-json.js';
import { isRecord } from '../../util/is-record.js';
import { sha256Hex } from '../../fs/core/hash.js';

/** The layer annotation holding a signature's Rekor bundle (its SET), as cosign writes it. */
export const SIGSTORE_BUNDLE_ANNOTATION = 'dev.sigstore.cosign/bundle';

const sameKeys = (o: Record<string, unknown>, names: string[]) => Object.keys(o).length === names.length && names.every((n) => n in o);
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const b64 = (v: unknown): Buffer | null => (typeof v === 'string' && BASE64.test(v) ? Buffer.from(v, 'base64') : null);

/** The DER inside a PEM text holding exactly one block (its type and headers not compared, as containers/image). */
function pemBody(pem: Buffer): Buffer | null {
  const m = /^-----BEGIN ([A-Z0-9 ]+)-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END \1-----\r?\n?$/.exec(pem.toString('latin1'));
  return m ? Buffer.from(m[2]!.replace(/\s+/g, ''), 'base64') : null;
}

/**
 * A Rekor SET (signed entry timestamp) as containers/image checks it for a signature by a
 * public key (signature/internal/rekor_set.go VerifyRekorSET), offline: the bundle
 * `{"SignedEntryTimestamp": B64, "Payload": {"body", "integratedTime", "logIndex",
 * "logID"}}` (exactly those fields), its SET an ECDSA signature by one of `rekorKeys`
 * over the SHA-256 of the Payload's canonical JSON (RFC 8785: here its four fields in
 * key order), and the body a hashedrekord 0.0.1 entry naming the same public key (PEM
 * body), the same signature and the SHA-256 of the same payload. Proves the signature
 * was logged; the log's time is not looked at. The bundle and its Payload are read as
 * containers/image reads them (its stricter decoder): a key repeated there is refused,
 * where JSON.parse would keep the last one and so check other bytes than a reader that
 * keeps the first. Returns why it fails, or null.
 */
export function verifyRekorSet(rekorKeys: KeyObject[], bundle: string, signerSpki: Buffer, base64Signature: string, payload: Buffer): string | null {
  let set: unknown;
  try {
    set = JSON.parse(bundle);
  } catch {
    return 'is not JSON';
  }
  const dup = duplicateKey(bundle, (path) => path.length === 0 || (path.length === 1 && path[0] === 'Payload'));
  if (dup !== null) return `has ${describeDuplicate(dup)}`;
  if (!isRecord(set) || !sameKeys(set, ['SignedEntryTimestamp', 'Payload'])) return 'has other fields than SignedEntryTimestamp and Payload';
  const p = set.Payload;
  const sig = b64(set.SignedEntryTimestamp);
  if (sig === null) return 'has a SignedEntryTimestamp that is not base64';
  if (!isRecord(p) || !sameKeys(p, ['body', 'integratedTime', 'logIndex', 'logID'])) return 'has a Payload with other fields than body, integratedTime, logIndex and logID';
  if (typeof p.body !== 'string' || typeof p.logID !== 'string' || !Number.isSafeInteger(p.integratedTime) || !Number.isSafeInteger(p.logIndex)) return 'has a Payload whose fields are not of their types';
  // RFC 8785 for this object: its members sorted by name, strings and integers as ECMAScript writes them.
  const canonical = JSON.stringify({ body: p.body, integratedTime: p.integratedTime, logID: p.logID, logIndex: p.logIndex });
  if (!rekorKeys.some((k) => verify('sha256', Buffer.from(canonical), { key: k, dsaEncoding: 'der' }, sig))) return `is not signed by ${rekorKeys.length > 1 ? 'any of the policy\'s Rekor keys' : 'the policy\'s Rekor key'}`;
  const bodyBytes = b64(p.body);
  let entry: unknown;
  try {
    entry = JSON.parse(bodyBytes?.toString('utf8') ?? '');
  } catch {
    return 'has a body that is not base64 JSON';
  }
  const e = isRecord(entry) ? entry : {};
  if (e.kind !== 'hashedrekord' || e.apiVersion !== '0.0.1') return `logs a ${JSON.stringify(e.kind)} ${JSON.stringify(e.apiVersion)} entry, not a hashedrekord 0.0.1`;
  const spec = isRecord(e.spec) ? e.spec : {};
  const s = isRecord(spec.signature) ? spec.signature : {};
  const pk = isRecord(s.publicKey) ? s.publicKey : {};
  const pem = b64(pk.content);
  const der = pem && pemBody(pem);
  if (der === null) return 'logs no PEM public key';
  if (!der.equals(signerSpki)) return 'logs another public key';
  const logged = b64(s.content);
  if (logged === null || !logged.equals(Buffer.from(base64Signature, 'base64'))) return 'logs another signature';
  const data = isRecord(spec.data) ? spec.data : {};
  const hash = isRecord(data.hash) ? data.hash : {};
  if (hash.algorithm !== 'sha256') return `logs a ${JSON.stringify(hash.algorithm)} hash, not sha256`;
  if (typeof hash.value !== 'string' || hash.value.toLowerCase() !== sha256Hex(payload)) return 'logs the hash of another payload';
  return null;
}
