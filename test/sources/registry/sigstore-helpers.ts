import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect } from 'vitest';
import { tool } from '../../helpers/tools.js';
import type { TestRegistry } from './registry-helpers.js';

/**
 * Sigstore signatures made without cosign (Debian has none, and its skopeo is built with
 * "sigstore disabled"): the keys and signatures with openssl, the payload as cosign
 * writes it, the attachment as an OCI layout pushed with the real skopeo to the tag
 * `sha256-HEX.sig` beside the image, as `cosign sign --key` leaves it.
 */
export type KeyKind = 'ecdsa-p256' | 'ecdsa-p384' | 'ed25519' | 'rsa';

export interface SigningKey {
  kind: KeyKind;
  /** The private key (PEM). */
  priv: string;
  /** The public key (PEM, SubjectPublicKeyInfo: what a policy's keyPath names). */
  pub: string;
}

/** A key pair made with openssl in DIR/NAME.{key,pub}. */
export async function signingKey(dir: string, name: string, kind: KeyKind): Promise<SigningKey> {
  const priv = path.join(dir, `${name}.key`);
  const pub = path.join(dir, `${name}.pub`);
  if (kind === 'ecdsa-p256' || kind === 'ecdsa-p384') await tool('openssl', ['ecparam', '-genkey', '-noout', '-name', kind === 'ecdsa-p256' ? 'prime256v1' : 'secp384r1', '-out', priv]);
  else if (kind === 'ed25519') await tool('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', priv]);
  else await tool('openssl', ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', priv]);
  await tool('openssl', ['pkey', '-in', priv, '-pubout', '-out', pub]);
  return { kind, priv, pub };
}

/** A cosign payload ("cosign container image signature") of a manifest digest for a docker reference, as cosign marshals it. */
export function cosignPayload(digest: string, dockerReference: string, optional: Record<string, unknown> | null = null): Buffer {
  return Buffer.from(JSON.stringify({ critical: { identity: { 'docker-reference': dockerReference }, image: { 'docker-manifest-digest': digest }, type: 'cosign container image signature' }, optional }));
}

/**
 * The base64 signature of `payload` by `key`, made by openssl as cosign makes it: ECDSA
 * and RSA over its SHA-256 (`openssl dgst -sha256 -sign`: a DER ECDSA signature, RSA
 * PKCS#1 v1.5), Ed25519 over the payload itself (`openssl pkeyutl -sign -rawin`).
 */
export async function signPayload(key: SigningKey, payload: Buffer, scratch: string): Promise<string> {
  const file = path.join(scratch, `payload-${createHash('sha256').update(payload).digest('hex').slice(0, 16)}`);
  const sig = `${file}.sig`;
  fs.writeFileSync(file, payload);
  if (key.kind === 'ed25519') await tool('openssl', ['pkeyutl', '-sign', '-inkey', key.priv, '-rawin', '-in', file, '-out', sig]);
  else await tool('openssl', ['dgst', '-sha256', '-sign', key.priv, '-out', sig, file]);
  return fs.readFileSync(sig).toString('base64');
}

/** A layer of an attachment: a signature (payload, its base64 signature, its Rekor bundle), or another kind of attachment. */
export type AttachmentLayer = { payload: Buffer; signature: string; bundle?: string } | { mediaType: string; data: Buffer };

/**
 * A Rekor bundle (the `dev.sigstore.cosign/bundle` annotation) for a signature, as a Rekor
 * log signed by `rekor` (an ECDSA key made with openssl, standing in for the log's) would
 * give it: the hashedrekord 0.0.1 entry of the signer's public key, the signature and the
 * payload's SHA-256; its SET an ECDSA signature by openssl of the Payload's canonical JSON
 * (RFC 8785, written out here member by member), the bundle in cosign's field order.
 */
export async function rekorBundle(rekor: SigningKey, signerPub: string, signature: string, payload: Buffer, scratch: string, o: { payloadHash?: string } = {}): Promise<string> {
  const entry = { apiVersion: '0.0.1', kind: 'hashedrekord', spec: { data: { hash: { algorithm: 'sha256', value: o.payloadHash ?? createHash('sha256').update(payload).digest('hex') } }, signature: { content: signature, publicKey: { content: fs.readFileSync(signerPub).toString('base64') } } } };
  const body = Buffer.from(JSON.stringify(entry)).toString('base64');
  const [integratedTime, logIndex, logID] = [1700000000, 4242, 'c0d23d6ad406973f9559f3ba2d1ca01f84147d8ffc5b8445c224f98b9591801d'];
  const canonical = `{"body":"${body}","integratedTime":${integratedTime},"logID":"${logID}","logIndex":${logIndex}}`;
  const set = await signPayload(rekor, Buffer.from(canonical), scratch);
  return JSON.stringify({ SignedEntryTimestamp: set, Payload: { body, integratedTime, logIndex, logID } });
}

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/**
 * The sigstore attachment of `digest` in REPO, pushed with the real skopeo (`copy
 * --preserve-digests oci:DIR docker://HOST/REPO:sha256-HEX.sig`): an OCI image manifest
 * whose layers are the payloads (application/vnd.dev.cosign.simplesigning.v1+json,
 * annotated dev.cosignproject.cosign/signature), its config what cosign writes. The
 * registry's manifest is checked to be the one built, byte for byte (its digest).
 */
export async function pushAttachment(reg: TestRegistry, scratch: string, repo: string, digest: string, layers: AttachmentLayer[]): Promise<{ tag: string; manifest: string }> {
  const tag = `${digest.replace(':', '-')}.sig`;
  const dir = fs.mkdtempSync(path.join(scratch, 'attachment-'));
  fs.mkdirSync(path.join(dir, 'blobs', 'sha256'), { recursive: true });
  const blob = (b: Buffer) => {
    const d = sha256(b);
    fs.writeFileSync(path.join(dir, 'blobs', 'sha256', d.slice(7)), b);
    return { digest: d, size: b.length };
  };
  const descs = layers.map((l) => ('payload' in l ? { mediaType: 'application/vnd.dev.cosign.simplesigning.v1+json', ...blob(l.payload), annotations: { 'dev.cosignproject.cosign/signature': l.signature, ...(l.bundle ? { 'dev.sigstore.cosign/bundle': l.bundle } : {}) } } : { mediaType: l.mediaType, ...blob(l.data) }));
  const config = blob(Buffer.from(JSON.stringify({ architecture: '', created: '0001-01-01T00:00:00Z', history: [{ created: '0001-01-01T00:00:00Z' }], os: '', rootfs: { type: 'layers', diff_ids: descs.map((d) => d.digest) }, config: {} })));
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: descs }));
  const m = blob(manifest);
  fs.writeFileSync(path.join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  fs.writeFileSync(path.join(dir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', ...m, annotations: { 'org.opencontainers.image.ref.name': 'sig' } }] }));
  const digestFile = path.join(dir, 'pushed-digest');
  await tool('skopeo', ['--insecure-policy', 'copy', '--quiet', '--preserve-digests', '--digestfile', digestFile, '--dest-cert-dir', path.join(reg.certsDir, reg.host), `oci:${dir}:sig`, `docker://${reg.host}/${repo}:${tag}`]);
  expect(fs.readFileSync(digestFile, 'utf8').trim(), 'skopeo pushed the attachment manifest unchanged').toBe(m.digest);
  return { tag, manifest: m.digest };
}

/** Overwrites a blob in the registry's storage with as many other bytes: the registry then serves bytes that do not match the digest. */
export function damageBlob(reg: TestRegistry, digest: string): void {
  const hex = digest.slice(7);
  const data = path.join(reg.storage, 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');
  const b = fs.readFileSync(data);
  fs.writeFileSync(data, Buffer.from(b.toString('utf8').replace('cosign', 'COSIGN')));
}
