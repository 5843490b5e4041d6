import type { KeyObject } from 'node:crypto';
import { StagedrootError } from '../../errors.js';
import { readSmallFile } from '../../fs/trees/fetch-file.js';
import { descriptor } from '../oci/read-blob.js';
import type { RegistryClient } from './client.js';
import { identityMatches, type Requirement } from './policy.js';
import { SIGSTORE_BUNDLE_ANNOTATION, verifyRekorSet } from './rekor-set.js';
import { formatReference, type ImageReference } from './reference.js';
import { parseSigstorePayload, sigstoreKey, SIGSTORE_SIGNATURE_ANNOTATION, SIGSTORE_SIGNATURE_MEDIA_TYPE, verifySigstoreSignature, type SigstoreKey } from './sigstore-payload.js';

/** A payload's limit (containers/image's MaxSignatureBodySize). */
const MAX_PAYLOAD = 4 * 1024 * 1024;
/** Layers of an attachment read at most (a registry cannot make a pull fetch without end). */
const MAX_LAYERS = 64;
const MAX_KEY = 1024 * 1024;
const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';

/** One signature layer of an attachment: its payload, base64 signature and Rekor bundle (when it has one), or why they could not be read. */
export type SigstoreSignature = { payload: Buffer; signature: string; bundle?: string } | { why: string };

/** The sigstore attachment of a manifest: its tag, its signature layers and how many other layers (attestations…) it has; none: `found` false. */
export interface SigstoreAttachments {
  tag: string;
  found: boolean;
  signatures: SigstoreSignature[];
  others: number;
}

/** The tag of a manifest digest's sigstore attachment: `sha256-HEX.sig`. */
export function attachmentTag(digest: string): string {
  return `${digest.replace(':', '-')}.sig`;
}

/**
 * The sigstore signatures of a manifest digest as cosign and containers/image store them:
 * the OCI image manifest at the tag `sha256-HEX.sig` of the same repository, fetched
 * through `client` (the endpoint that served the image: its credentials, TLS and
 * mirror); a 404 is no signature. Each layer of media type
 * application/vnd.dev.cosign.simplesigning.v1+json is one signature: the blob is the
 * payload (read whole, at most 4 MiB, checked by size and digest), its annotation
 * dev.cosignproject.cosign/signature the base64 signature. Other layers are counted, not
 * fetched. A manifest that is no OCI image manifest is SIGNATURE_INVALID; a registry
 * that fails is its REGISTRY_FAILED.
 */
export async function readSigstoreAttachments(client: RegistryClient, digest: string): Promise<SigstoreAttachments> {
  const tag = attachmentTag(digest);
  const m = await client.manifestIfAny(tag, 'the sigstore attachment');
  if (m === null) return { tag, found: false, signatures: [], others: 0 };
  const bad = (why: string): never => {
    throw new StagedrootError('SIGNATURE_INVALID', `${client.image}: the sigstore attachment ${tag} (${m.digest}) ${why}`, { path: tag });
  };
  if (m.mediaType !== OCI_MANIFEST) bad(`is ${m.mediaType}, not an OCI image manifest`);
  if (!Array.isArray(m.doc.layers)) bad('has no layers list');
  const layers = m.doc.layers as unknown[];
  if (layers.length > MAX_LAYERS) bad(`has ${layers.length} layers (at most ${MAX_LAYERS} are read)`);
  const out: SigstoreAttachments = { tag, found: true, signatures: [], others: 0 };
  for (const [i, l] of layers.entries()) {
    const d = descriptor(l, `layer ${i + 1}`, `${client.image}: the sigstore attachment ${tag}`);
    if (d.mediaType !== SIGSTORE_SIGNATURE_MEDIA_TYPE) {
      out.others++;
      continue;
    }
    const signature = d.annotations?.[SIGSTORE_SIGNATURE_ANNOTATION];
    if (typeof signature !== 'string') {
      out.signatures.push({ why: `has no ${SIGSTORE_SIGNATURE_ANNOTATION} annotation` });
      continue;
    }
    try {
      const bundle = d.annotations?.[SIGSTORE_BUNDLE_ANNOTATION];
      out.signatures.push({ payload: await client.smallBlob(d, `the payload of the signature in ${tag}`, MAX_PAYLOAD), signature, ...(typeof bundle === 'string' ? { bundle } : {}) });
    } catch (err) {
      // A payload that is not what its descriptor says does not count (a registry's fault, named); the registry failing is the machine's trouble.
      if (!(err instanceof StagedrootError) || (err.code !== 'SOURCE_CORRUPT' && err.code !== 'UNSAFE_ENTRY')) throw err;
      out.signatures.push({ why: `has a payload that cannot be used: ${err.message.slice(client.image.length + 2)}` });
    }
  }
  return out;
}

type SigstoreSigned = Extract<Requirement, { type: 'sigstoreSigned' }>;

/** The policy's keys, and Rekor's when it names them, read and parsed; a key that cannot be is SIGNATURE_INVALID naming it. */
export interface PolicyKeys {
  keys: SigstoreKey[];
  /** Rekor's keys (ECDSA); none: no SET is asked for. */
  rekor: KeyObject[];
}

export async function sigstoreKeys(req: SigstoreSigned): Promise<PolicyKeys> {
  const read = async (paths: string[], data: Buffer[], what: string, dataName: string): Promise<SigstoreKey[]> => {
    const pems: [Buffer, string][] = [];
    for (const p of paths) {
      const pem = await readSmallFile(p, MAX_KEY);
      if (pem === null) throw new StagedrootError('SIGNATURE_INVALID', `The policy's ${what} ${p} cannot be read (missing, or over 1 MiB)`, { path: p });
      pems.push([pem, p]);
    }
    data.forEach((pem, i) => pems.push([pem, data.length > 1 ? `${dataName}s[${i}]` : dataName]));
    return pems.map(([pem, name]) => {
      try {
        return sigstoreKey(pem, name);
      } catch (err) {
        throw new StagedrootError('SIGNATURE_INVALID', `The policy's ${what} ${(err as Error).message}`, { path: name });
      }
    });
  };
  const rekor = await read(req.rekorKeyPaths, req.rekorKeyData, 'Rekor key', 'rekorPublicKeyData');
  const notEc = rekor.find((k) => k.key.asymmetricKeyType !== 'ec');
  if (notEc) throw new StagedrootError('SIGNATURE_INVALID', `The policy's Rekor key ${notEc.name} is not an ECDSA key (Rekor signs with ECDSA)`, { path: notEc.name });
  return { keys: await read(req.keyPaths, req.keyData, 'sigstore key', 'keyData'), rekor: rekor.map((k) => k.key) };
}

/** The keys a requirement names, for messages: their files, or keyData. */
export function sigstoreKeyNames(req: SigstoreSigned): string {
  return req.keyPaths.join(', ') || (req.keyData.length > 1 ? 'one of the keyDatas keys' : 'the keyData key');
}

/**
 * sigstoreSigned for one image (containers/image's policy_eval_sigstore.go, public keys):
 * a signature counts when it verifies with one of the keys, its Rekor SET (when the policy
 * names Rekor keys) proves it logged, its payload is a "cosign
 * container image signature" of this manifest digest, and its identity matches the
 * reference as the policy's signedIdentity says. Any one is enough. Returns which key
 * signed, or why none counted (each signature's reason).
 */
export function verifySigstoreSigned(req: SigstoreSigned, { keys, rekor }: PolicyKeys, att: SigstoreAttachments, ref: ImageReference, digest: string): { key: SigstoreKey } | { why: string } {
  if (att.signatures.length === 0) {
    return { why: att.found ? `it has no sigstore signature (its attachment ${att.tag} holds ${att.others} other layer${att.others === 1 ? '' : 's'})` : `it has no sigstore signature (no attachment ${att.tag} in ${ref.registry}/${ref.repository})` };
  }
  const whys: string[] = [];
  for (const [i, s] of att.signatures.entries()) {
    const n = `signature ${i + 1}`;
    if ('why' in s) {
      whys.push(`${n} ${s.why}`);
      continue;
    }
    const key = keys.find((k) => verifySigstoreSignature(k, s.payload, s.signature));
    if (key === undefined) {
      whys.push(`${n} is not by ${keys.length > 1 ? 'any of those keys' : 'that key'}`);
      continue;
    }
    if (rekor.length > 0) {
      const set = s.bundle === undefined ? `has no ${SIGSTORE_BUNDLE_ANNOTATION} annotation (the Rekor SET the policy asks for)` : verifyRekorSet(rekor, s.bundle, key.key.export({ type: 'spki', format: 'der' }), s.signature, s.payload);
      if (set !== null) {
        whys.push(s.bundle === undefined ? `${n} ${set}` : `${n}'s Rekor SET ${set}`);
        continue;
      }
    }
    const claim = parseSigstorePayload(s.payload);
    if ('why' in claim) whys.push(`${n}'s payload ${claim.why}`);
    else if (claim.digest !== digest) whys.push(`${n} signs ${claim.digest}, not ${digest}`);
    else if (!identityMatches(req.signedIdentity, ref, claim.reference)) whys.push(`${n} is for ${JSON.stringify(claim.reference)}, which ${req.signedIdentity.type} does not accept for ${formatReference(ref)}`);
    else return { key };
  }
  const count = att.signatures.length;
  return { why: `${count} signature${count === 1 ? '' : 's'}: ${whys.join('; ')}` };
}
