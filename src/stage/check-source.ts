import { StagedrootError } from '../errors.js';
import { readBytes } from '../fs/core/host-paths.js';
import type { Source, SourceInfo } from '../sources/source.js';
import type { Layout } from '../state/layout.js';
import type { SignatureRecord } from '../state/schema.js';
import { loadTrustedKeys } from '../trust/keys.js';
import { verifySignature } from '../trust/verify.js';
import type { PublicKey } from '../trust/minisign.js';

/** A signature file is three short lines. */
const MAX_SIGNATURE_BYTES = 64 * 1024;

export interface CheckedSource {
  info: SourceInfo;
  /** The verified signature, or null when the sysroot trusts no key. */
  signature: SignatureRecord | null;
}

/**
 * What a stage knows about its source before planning it: the source's identity (an
 * image's manifest, checked) and, when the sysroot has trusted keys, its verified
 * signature. With a key present, a source that is unsigned, wrongly signed, signed by
 * an untrusted key, or cannot carry a signature at all is rejected (SIGNATURE_INVALID).
 */
export async function checkSource(layout: Layout, source: Source, o: { signature?: string; keys?: readonly PublicKey[] } = {}): Promise<CheckedSource> {
  const keys = o.keys ?? loadTrustedKeys(layout);
  const info = source.inspect ? await source.inspect() : {};
  if (keys.length === 0) {
    if (o.signature !== undefined) {
      throw new StagedrootError('USAGE', `--signature ${o.signature} was given, but this sysroot trusts no key to verify it with (add one with \`stagedroot trust add KEYFILE\`)`, { option: 'signature', value: o.signature });
    }
    return { info, signature: null };
  }
  const trusted = keys.map((k) => k.keyId).join(', ');
  if (!info.signed) {
    throw new StagedrootError('SIGNATURE_INVALID', `${source.describe} cannot carry a detached signature (only files and OCI image layouts can), and this sysroot requires signed sources (trusted keys: ${trusted})`, {});
  }
  const where = o.signature ?? info.signed.defaultSignature;
  const text = readBytes(where, MAX_SIGNATURE_BYTES);
  if (text === null) {
    throw new StagedrootError('SIGNATURE_INVALID', `${source.describe} is not signed: there is no ${where}, and this sysroot requires signed sources (trusted keys: ${trusted})`, { path: where });
  }
  const v = await verifySignature(info.signed.payload, text.toString('utf8'), where, keys);
  return { info, signature: { keyId: v.keyId, algorithm: v.algorithm, trustedComment: v.trustedComment } };
}
