/**
 * The pure parts of sigstoreSigned: the keys node:crypto verifies cosign's signatures
 * with (made by openssl: ECDSA P-256 and P-384, RSA, Ed25519; others refused), the
 * payload read as containers/image reads it, the policy's parse, and registries.d's
 * use-sigstore-attachments looked up per scope.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicy } from '../../../src/sources/registry/policy.js';
import { parsePullspec } from '../../../src/sources/registry/reference.js';
import { registriesDFor } from '../../../src/sources/registry/registries-d.js';
import { verifyRekorSet } from '../../../src/sources/registry/rekor-set.js';
import { parseSigstorePayload, sigstoreKey, verifySigstoreSignature } from '../../../src/sources/registry/sigstore-payload.js';
import { tool } from '../../helpers/tools.js';
import { cosignPayload, rekorBundle, signingKey, signPayload, type KeyKind } from './sigstore-helpers.js';

const D = `sha256:${'a'.repeat(64)}`;
let scratch: string;
beforeAll(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-sigstore-unit-'));
});
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

describe('sigstore keys and signatures (openssl-made)', () => {
  it.each<KeyKind>(['ecdsa-p256', 'ecdsa-p384', 'rsa', 'ed25519'])('%s: its signature of the payload verifies; of another payload, by another key or not base64, it does not', async (kind) => {
    const k = await signingKey(scratch, kind, kind);
    const key = sigstoreKey(fs.readFileSync(k.pub), k.pub);
    expect(key.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    const payload = cosignPayload(D, 'example.com/os:1');
    const sig = await signPayload(k, payload, scratch);
    expect(verifySigstoreSignature(key, payload, sig)).toBe(true);
    expect(verifySigstoreSignature(key, cosignPayload(D, 'example.com/os:2'), sig)).toBe(false);
    expect(verifySigstoreSignature(key, payload, sig.slice(0, -4))).toBe(false);
    expect(verifySigstoreSignature(key, payload, `${sig}!`)).toBe(false);
    const other = await signingKey(scratch, `${kind}-other`, kind);
    expect(verifySigstoreSignature(sigstoreKey(fs.readFileSync(other.pub), other.pub), payload, sig)).toBe(false);
  });

  it('a key that is not ECDSA, RSA or Ed25519, or no key, is refused naming it', async () => {
    const x = path.join(scratch, 'x25519.key');
    await tool('openssl', ['genpkey', '-algorithm', 'x25519', '-out', x]);
    const pub = (await tool('openssl', ['pkey', '-in', x, '-pubout'])).stdout;
    expect(() => sigstoreKey(Buffer.from(String(pub)), 'x.pub')).toThrow('x.pub is a x25519 key: sigstore signatures are verified with ECDSA, RSA or Ed25519 keys');
    expect(() => sigstoreKey(Buffer.from('not a key'), 'k.pub')).toThrow(/^k\.pub is not a PEM public key/);
  });
});

describe('a Rekor SET (offline, as containers/image checks it for a public key)', () => {
  it('proves the signature by that key of that payload was logged by the log whose key the policy names', async () => {
    const [signer, other, log, otherLog] = await Promise.all(['s', 'o', 'log', 'other-log'].map((n) => signingKey(scratch, `set-${n}`, 'ecdsa-p256')));
    const payload = cosignPayload(D, 'example.com/os:1');
    const sig = await signPayload(signer!, payload, scratch);
    const spki = sigstoreKey(fs.readFileSync(signer!.pub), 's').key.export({ type: 'spki', format: 'der' });
    const logKey = sigstoreKey(fs.readFileSync(log!.pub), 'log').key;
    const bundle = await rekorBundle(log!, signer!.pub, sig, payload, scratch);
    expect(verifyRekorSet([logKey], bundle, spki, sig, payload)).toBeNull();
    expect(verifyRekorSet([sigstoreKey(fs.readFileSync(otherLog!.pub), 'ol').key, logKey], bundle, spki, sig, payload)).toBeNull();
    expect(verifyRekorSet([logKey], await rekorBundle(otherLog!, signer!.pub, sig, payload, scratch), spki, sig, payload)).toBe("is not signed by the policy's Rekor key");
    const edited = JSON.parse(bundle) as { Payload: { integratedTime: number } };
    edited.Payload.integratedTime++;
    expect(verifyRekorSet([logKey], JSON.stringify(edited), spki, sig, payload)).toBe("is not signed by the policy's Rekor key");
    expect(verifyRekorSet([logKey], await rekorBundle(log!, other!.pub, sig, payload, scratch), spki, sig, payload)).toBe('logs another public key');
    const otherSig = await signPayload(signer!, cosignPayload(D, 'example.com/os:2'), scratch);
    expect(verifyRekorSet([logKey], await rekorBundle(log!, signer!.pub, otherSig, payload, scratch), spki, sig, payload)).toBe('logs another signature');
    expect(verifyRekorSet([logKey], await rekorBundle(log!, signer!.pub, sig, payload, scratch, { payloadHash: 'f'.repeat(64) }), spki, sig, payload)).toBe('logs the hash of another payload');
    expect(verifyRekorSet([logKey], JSON.stringify({ ...JSON.parse(bundle), more: 1 }), spki, sig, payload)).toBe('has other fields than SignedEntryTimestamp and Payload');
    expect(verifyRekorSet([logKey], '{', spki, sig, payload)).toBe('is not JSON');
    // A repeated key: JSON.parse keeps the last (the signed value here), a first-wins reader the other; both refused, as containers/image does.
    const doubled = bundle.replace('"Payload":{', '"Payload":{"logIndex":999999,');
    expect(doubled).not.toBe(bundle);
    expect(verifyRekorSet([logKey], doubled, spki, sig, payload)).toBe('has the key "logIndex" twice in Payload');
    expect(verifyRekorSet([logKey], `{"SignedEntryTimestamp":"AAAA",${bundle.slice(1)}`, spki, sig, payload)).toBe('has the key "SignedEntryTimestamp" twice');
  });
});

describe('the cosign payload', () => {
  const doc = (critical: unknown, optional: unknown = null, extra: Record<string, unknown> = {}) => Buffer.from(JSON.stringify({ critical, optional, ...extra }));
  const crit = (o: Record<string, unknown> = {}) => ({ type: 'cosign container image signature', image: { 'docker-manifest-digest': D }, identity: { 'docker-reference': 'example.com/os' }, ...o });

  it('is read as containers/image reads it: exactly its fields, the cosign type, a digest, optional null or an object', () => {
    expect(parseSigstorePayload(cosignPayload(D, 'example.com/os:1'))).toEqual({ digest: D, reference: 'example.com/os:1' });
    expect(parseSigstorePayload(doc(crit(), { creator: 'cosign', timestamp: 1700000000, anything: [1] }))).toEqual({ digest: D, reference: 'example.com/os' });
    expect(parseSigstorePayload(Buffer.from('{'))).toEqual({ why: 'is not JSON' });
    expect(parseSigstorePayload(doc(crit(), null, { more: 1 }))).toEqual({ why: 'the payload has unknown fields more' });
    expect(parseSigstorePayload(Buffer.from(JSON.stringify({ critical: crit() })))).toEqual({ why: 'the payload has no optional' });
    expect(parseSigstorePayload(doc(crit({ type: 'atomic container signature' })))).toEqual({ why: 'is of type "atomic container signature", not "cosign container image signature"' });
    expect(parseSigstorePayload(doc(crit({ extra: 1 })))).toEqual({ why: 'critical has unknown fields extra' });
    expect(parseSigstorePayload(doc(crit({ image: { 'docker-manifest-digest': D, x: 1 } })))).toEqual({ why: 'critical.image has unknown fields x' });
    expect(parseSigstorePayload(doc(crit({ identity: {} })))).toEqual({ why: 'critical.identity has no docker-reference' });
    expect(parseSigstorePayload(doc(crit({ image: { 'docker-manifest-digest': 'sha256:ABC' } })))).toEqual({ why: 'names the digest "sha256:ABC", which is no sha256 or sha512 digest' });
    expect(parseSigstorePayload(doc(crit(), { timestamp: 1.5 }))).toEqual({ why: 'has an optional.timestamp that is not an integer' });
    expect(parseSigstorePayload(doc(crit(), 'x'))).toEqual({ why: 'has an optional that is neither null nor an object' });
  });

  it('a key repeated in the payload, critical, its image or identity, or optional is refused (JSON.parse would keep the last); inside optional\'s values it is not looked at, as containers/image', () => {
    const good = `"type": "cosign container image signature", "image": {"docker-manifest-digest": "${D}"}`;
    const payload = (s: string) => parseSigstorePayload(Buffer.from(s));
    // a signer's identity, then another one the verifier would read instead
    expect(payload(`{"critical": {${good}, "identity": {"docker-reference": "example.com/os", "docker-reference": "evil.com/os"}}, "optional": null}`)).toEqual({ why: 'has the key "docker-reference" twice in critical.identity' });
    expect(payload(`{"critical": {"type": "cosign container image signature", "image": {"docker-manifest-digest": "${D}", "docker-manifest-digest": "${D}"}, "identity": {"docker-reference": "example.com/os"}}, "optional": null}`)).toEqual({ why: 'has the key "docker-manifest-digest" twice in critical.image' });
    expect(payload(`{"critical": {${good}, "identity": {"docker-reference": "example.com/os"}, "type": "x"}, "optional": null}`)).toEqual({ why: 'has the key "type" twice in critical' });
    expect(payload(`{"critical": {${good}, "identity": {"docker-reference": "a.com/os"}}, "critical": {${good}, "identity": {"docker-reference": "example.com/os"}}, "optional": null}`)).toEqual({ why: 'has the key "critical" twice' });
    expect(payload(`{"critical": {${good}, "identity": {"docker-reference": "example.com/os"}}, "optional": {"creator": "a", "creator": "b"}}`)).toEqual({ why: 'has the key "creator" twice in optional' });
    expect(payload(`{"critical": {${good}, "identity": {"docker-reference": "example.com/os"}}, "optional": {"annotations": {"k": "a", "k": "b"}}}`)).toEqual({ digest: D, reference: 'example.com/os' });
  });
});

describe('sigstoreSigned in the policy', () => {
  const parse = (r: Record<string, unknown>) => parsePolicy(JSON.stringify({ default: [{ type: 'sigstoreSigned', ...r }] }), 'p.json').default[0];

  it('takes exactly one of keyPath, keyPaths, keyData, keyDatas, at most one of the rekorPublicKey fields, and signedIdentity as signedBy; fulcio and pki are kept to be refused where they apply', () => {
    expect(parse({ keyPath: '/k.pub' })).toEqual({ type: 'sigstoreSigned', keyPaths: ['/k.pub'], keyData: [], signedIdentity: { type: 'matchRepoDigestOrExact' }, rekorKeyPaths: [], rekorKeyData: [], unsupported: [] });
    expect(parse({ keyPath: '/k.pub', rekorPublicKeyPaths: ['/r1', '/r2'] })).toMatchObject({ rekorKeyPaths: ['/r1', '/r2'], rekorKeyData: [] });
    expect(parse({ keyPath: '/k.pub', rekorPublicKeyData: Buffer.from('R').toString('base64') })).toMatchObject({ rekorKeyPaths: [], rekorKeyData: [Buffer.from('R')] });
    expect(() => parse({ keyPath: '/k', rekorPublicKeyPath: '/r', rekorPublicKeyData: 'x' })).toThrow('sigstoreSigned has rekorPublicKeyPath and rekorPublicKeyData: it takes exactly one of rekorPublicKeyPath, rekorPublicKeyPaths, rekorPublicKeyData, rekorPublicKeyDatas');
    expect(parse({ keyPaths: ['/a', '/b'], signedIdentity: { type: 'matchRepository' } })).toMatchObject({ keyPaths: ['/a', '/b'], signedIdentity: { type: 'matchRepository' } });
    expect(parse({ keyDatas: [Buffer.from('A').toString('base64'), Buffer.from('B').toString('base64')] })).toMatchObject({ keyPaths: [], keyData: [Buffer.from('A'), Buffer.from('B')] });
    expect(parse({ fulcio: {}, rekorPublicKeyData: 'x' })).toMatchObject({ unsupported: ['fulcio'] });
    expect(parse({ keyPath: '/k', pki: {} })).toMatchObject({ unsupported: ['pki'] });
    expect(() => parse({ keyPath: '/k', rekorPublicKeyPth: '/r' })).toThrow('p.json: default[0]: sigstoreSigned has unknown field rekorPublicKeyPth');
    expect(() => parse({})).toThrow('p.json: default[0]: sigstoreSigned needs one of keyPath, keyPaths, keyData, keyDatas');
    expect(() => parse({ keyPath: '/a', keyPaths: ['/b'] })).toThrow('sigstoreSigned has keyPath and keyPaths: it takes exactly one');
    expect(() => parse({ keyPaths: [] })).toThrow('keyPaths is not a non-empty array of strings');
    expect(() => parse({ keyPath: '/a', signedIdentity: { type: 'remapIdentity' } })).toThrow(/remapIdentity" is not supported/);
  });
});

describe("registries.d's lookaside and use-sigstore-attachments", () => {
  it('each setting from the most specific scope that sets it, else default-docker; a value that is no boolean is refused', async () => {
    const dir = path.join(scratch, 'registries.d');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'a.yaml'), 'default-docker:\n  use-sigstore-attachments: true\n  lookaside: https://sigs.example\ndocker:\n  quay.io/ns:\n    lookaside: file:///ns\n  quay.io/ns/off:\n    use-sigstore-attachments: false\n');
    const ref = parsePullspec('quay.io/ns/os:1');
    expect(await registriesDFor(ref, dir)).toEqual({ lookaside: { url: 'file:///ns', file: path.join(dir, 'a.yaml') }, useSigstoreAttachments: { value: true, file: path.join(dir, 'a.yaml') } });
    expect(await registriesDFor(parsePullspec('quay.io/ns/off:1'), dir)).toMatchObject({ lookaside: { url: 'file:///ns' }, useSigstoreAttachments: { value: false } });
    expect(await registriesDFor(parsePullspec('other.io/os:1'), dir)).toMatchObject({ lookaside: { url: 'https://sigs.example' }, useSigstoreAttachments: { value: true } });
    expect(await registriesDFor(ref, path.join(scratch, 'none'))).toEqual({ lookaside: null, useSigstoreAttachments: null });
    fs.writeFileSync(path.join(dir, 'b.yaml'), 'docker:\n  example.com:\n    use-sigstore-attachments: "yes"\n');
    await expect(registriesDFor(ref, dir)).rejects.toThrow(`${path.join(dir, 'b.yaml')}: use-sigstore-attachments is "yes", not true or false`);
  });

  it('only *.yaml files are read, and a scope or default-docker defined in two files is refused naming both, as containers/image merges the directory', async () => {
    const dir = path.join(scratch, 'registries.d-merge');
    fs.mkdirSync(dir);
    const ref = parsePullspec('quay.io/ns/os:1');
    // podman and skopeo never read a .yml: its lookaside must not decide here either
    fs.writeFileSync(path.join(dir, 'a.yml'), 'docker:\n  quay.io/ns:\n    lookaside: file:///yml\n');
    expect(await registriesDFor(ref, dir)).toEqual({ lookaside: null, useSigstoreAttachments: null });
    fs.writeFileSync(path.join(dir, 'b.yaml'), 'default-docker:\n  lookaside: file:///b\ndocker:\n  quay.io/ns:\n    lookaside: file:///b-ns\n');
    expect(await registriesDFor(ref, dir)).toMatchObject({ lookaside: { url: 'file:///b-ns' } });
    fs.writeFileSync(path.join(dir, 'c.yaml'), 'docker:\n  quay.io/ns:\n    use-sigstore-attachments: true\n');
    await expect(registriesDFor(ref, dir)).rejects.toThrow(`The docker scope "quay.io/ns" is defined both in ${path.join(dir, 'b.yaml')} and in ${path.join(dir, 'c.yaml')}`);
    fs.writeFileSync(path.join(dir, 'c.yaml'), 'default-docker:\n  use-sigstore-attachments: true\n');
    await expect(registriesDFor(ref, dir)).rejects.toThrow(`default-docker is defined both in ${path.join(dir, 'b.yaml')} and in ${path.join(dir, 'c.yaml')}`);
  });
});
