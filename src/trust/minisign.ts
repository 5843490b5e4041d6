import { createPublicKey, type KeyObject } from 'node:crypto';
import { StagedrootError } from '../errors.js';

/**
 * The minisign / signify Ed25519 formats (https://jedisct1.github.io/minisign/):
 *
 *   public key:  "untrusted comment: ..." then base64("Ed" | key id (8) | key (32))
 *   signature:   "untrusted comment: ..." then base64(alg (2) | key id (8) | sig (64)),
 *                then "trusted comment: TEXT" and base64(global sig (64)) (minisign; signify
 *                writes the first two lines only)
 *
 * `alg` is "ED" (minisign >= 0.8's default: the signature is over BLAKE2b-512 of the file)
 * or "Ed" (legacy, and signify: over the file itself). The global signature is over the
 * 64 signature bytes followed by the trusted comment, so the comment cannot be swapped.
 */
export type SignatureAlgorithm = 'ED' | 'Ed';

export interface PublicKey {
  /** The key id as minisign prints it: upper-case hex of the little-endian id, no leading zeros. */
  keyId: string;
  key: KeyObject;
  /** The base64 line of the key file, as `minisign -P` takes it. */
  line: string;
}

export interface Signature {
  algorithm: SignatureAlgorithm;
  keyId: string;
  signature: Buffer;
  /** Absent for signify signatures, which have no trusted comment. */
  trusted?: { comment: string; signature: Buffer };
}

const UNTRUSTED = 'untrusted comment:';
const TRUSTED = 'trusted comment: ';

/** minisign prints the 8 key-id bytes as a little-endian 64-bit number in hex (`%" PRIX64`, unpadded). */
export function keyIdOf(bytes: Buffer): string {
  return Buffer.from(bytes).reverse().toString('hex').toUpperCase().replace(/^0+(?=.)/, '');
}

/**
 * The lines of a key or signature file, without their line ends (LF or CRLF) and nothing
 * more: the trusted comment is signed byte for byte, its trailing spaces too (minisign's
 * own reader trims only CR and LF).
 */
function lines(text: string): string[] {
  return text.split(/\r?\n/);
}

function decode(line: string | undefined, length: number, what: string, where: string): Buffer {
  const b64 = line?.trim(); // spaces around a base64 line are not part of it (nor signed)
  const b = b64 !== undefined && /^[A-Za-z0-9+/]+={0,2}$/.test(b64) ? Buffer.from(b64, 'base64') : null;
  if (b === null || b.length !== length) {
    throw new StagedrootError('SIGNATURE_INVALID', `${where} is not a minisign/signify ${what}: expected a base64 line of ${length} bytes`, { path: where });
  }
  return b;
}

/**
 * A public key from a minisign/signify key file, or from the bare base64 line that
 * `minisign -P` takes.
 */
export function parsePublicKey(text: string, where: string): PublicKey {
  const ls = lines(text).map((l) => l.trim()).filter((l) => l !== ''); // a key has no trusted comment: spaces are noise
  const line = ls[0]?.startsWith(UNTRUSTED) ? ls[1] : ls[0];
  const b = decode(line, 42, 'public key', where);
  if (b.subarray(0, 2).toString('latin1') !== 'Ed') {
    throw new StagedrootError('SIGNATURE_INVALID', `${where} is not an Ed25519 minisign/signify public key (algorithm ${JSON.stringify(b.subarray(0, 2).toString('latin1'))})`, { path: where });
  }
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b.subarray(10).toString('base64url') }, format: 'jwk' });
  return { keyId: keyIdOf(b.subarray(2, 10)), key, line: line! };
}

/** A detached signature file (`.minisig` or signify's `.sig`). */
export function parseSignature(text: string, where: string): Signature {
  const ls = lines(text);
  if (!ls[0]?.startsWith(UNTRUSTED)) {
    throw new StagedrootError('SIGNATURE_INVALID', `${where} is not a minisign/signify signature: it does not start with "${UNTRUSTED}"`, { path: where });
  }
  const b = decode(ls[1], 74, 'signature', where);
  const alg = b.subarray(0, 2).toString('latin1');
  if (alg !== 'ED' && alg !== 'Ed') {
    throw new StagedrootError('SIGNATURE_INVALID', `${where} uses the unknown signature algorithm ${JSON.stringify(alg)} (minisign knows "ED" and "Ed")`, { path: where });
  }
  const sig: Signature = { algorithm: alg, keyId: keyIdOf(b.subarray(2, 10)), signature: b.subarray(10) };
  const rest = ls.slice(2).filter((l) => l.trim() !== '');
  if (rest.length > 0) {
    if (!rest[0]!.startsWith(TRUSTED) || rest.length < 2) {
      throw new StagedrootError('SIGNATURE_INVALID', `${where} is not a minisign signature: the line after the signature must be "${TRUSTED}..." followed by its global signature`, { path: where });
    }
    sig.trusted = { comment: rest[0]!.slice(TRUSTED.length), signature: decode(rest[1], 64, 'global signature', where) };
  } else if (alg === 'ED') {
    throw new StagedrootError('SIGNATURE_INVALID', `${where} has no trusted comment (a prehashed "ED" signature always has one)`, { path: where });
  }
  return sig;
}
