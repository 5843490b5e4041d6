import { createHash, verify } from 'node:crypto';
import { StagedrootError } from '../errors.js';
import { parseSignature, type PublicKey, type SignatureAlgorithm } from './minisign.js';

/** What a signature covers: a file or a blob, streamed. */
export interface SignedPayload {
  /** For messages: "layer /srv/app.tar", "manifest sha256:ab12... of image /srv/os". */
  describe: string;
  chunks(): AsyncIterable<Uint8Array>;
}

export interface VerifiedSignature {
  keyId: string;
  algorithm: SignatureAlgorithm;
  /** The signed trusted comment (null for a signify signature, which has none). */
  trustedComment: string | null;
  /** Where the signature was read from. */
  signature: string;
}

/**
 * A legacy "Ed" signature is over the payload itself, and Ed25519 cannot be verified
 * incrementally: such payloads are read whole, up to this size (minisign itself signs
 * larger files prehashed).
 */
export const LEGACY_MAX_BYTES = 64 * 1024 * 1024;

const fail = (message: string, where: string, keyId?: string): never => {
  throw new StagedrootError('SIGNATURE_INVALID', message, { path: where, ...(keyId === undefined ? {} : { value: keyId }) });
};

/**
 * Verifies a detached minisign/signify signature (its text, read from `where`) of a
 * payload against the trusted keys: the key id must be one of them, the signature must
 * match the payload, and the trusted comment its global signature.
 */
export async function verifySignature(payload: SignedPayload, signatureText: string, where: string, keys: readonly PublicKey[]): Promise<VerifiedSignature> {
  const sig = parseSignature(signatureText, where);
  const key = keys.find((k) => k.keyId === sig.keyId);
  if (key === undefined) {
    fail(`${payload.describe} is signed with key ${sig.keyId} (${where}), which is not a trusted key of this sysroot (trusted: ${keys.map((k) => k.keyId).join(', ')})`, where, sig.keyId);
  }
  const message = sig.algorithm === 'ED' ? await blake2b(payload.chunks()) : await whole(payload, sig.keyId, where);
  if (!verify(null, message, key!.key, sig.signature)) {
    fail(`The signature ${where} by key ${sig.keyId} does not match ${payload.describe}: the content or the signature was altered`, where, sig.keyId);
  }
  if (sig.trusted && !verify(null, Buffer.concat([sig.signature, Buffer.from(sig.trusted.comment, 'utf8')]), key!.key, sig.trusted.signature)) {
    fail(`The trusted comment of ${where} (key ${sig.keyId}) does not match its global signature: it was altered`, where, sig.keyId);
  }
  return { keyId: sig.keyId, algorithm: sig.algorithm, trustedComment: sig.trusted?.comment ?? null, signature: where };
}

async function blake2b(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const h = createHash('blake2b512');
  for await (const c of chunks) h.update(c);
  return h.digest();
}

async function whole(payload: SignedPayload, keyId: string, where: string): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const c of payload.chunks()) {
    n += c.length;
    if (n > LEGACY_MAX_BYTES) {
      fail(`${where} is a legacy (non-prehashed) signature by key ${keyId}, and ${payload.describe} is larger than ${LEGACY_MAX_BYTES} bytes: sign it with minisign's default (prehashed) mode`, where, keyId);
    }
    parts.push(c);
  }
  return Buffer.concat(parts, n);
}
