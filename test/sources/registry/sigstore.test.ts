/**
 * containers-policy.json's sigstoreSigned against a real registry (docker-registry 2.8
 * with TLS): sigstore attachments (`sha256-HEX.sig`, as cosign leaves them) made with
 * openssl and pushed with the real skopeo (sigstore-helpers.ts), verified before any
 * layer is fetched. A good signature is staged and its key said; an unsigned image, one
 * signed by another key, of another digest, for another identity, with a payload the
 * registry damaged, without a Rekor SET by the policy's Rekor key (a log's key made with
 * openssl), and a policy asking for keyless signing are refused (exit 3,
 * SIGNATURE_INVALID naming the image and what was expected), nothing staged.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { hostPlatform } from '../../../src/sources/oci/platform.js';
import type { TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { tool } from '../../helpers/tools.js';
import { manifestOf, umociImage } from '../oci/oci-helpers.js';
import { freePort, gpgKey, mirrorConf, writeAuthFile, withRegistryScratch, type TestRegistry } from './registry-helpers.js';
import { cosignPayload, damageBlob, pushAttachment, rekorBundle, signingKey, signPayload, type SigningKey } from './sigstore-helpers.js';

describe('sigstoreSigned (sigstore attachments made with openssl, pushed with the real skopeo)', () => {
  const scratch = withRegistryScratch('stagedroot-sigstore-');
  let reg: TestRegistry;
  let auth: string;
  let registriesD: string;
  let digest: string;
  let trusted: SigningKey;
  let other: SigningKey;
  let ed: SigningKey;
  let rsa: SigningKey;
  let rekor: SigningKey;
  let gnupg: string;
  let gpg: { fpr: string; pub: string };
  let down: string;
  let t: TempSysroot | null = null;
  const otherDigest = `sha256:${'1'.repeat(64)}`;

  beforeAll(async () => {
    reg = await scratch.startRegistry('registry');
    let otherRekor: SigningKey;
    [trusted, other, ed, rsa, rekor, otherRekor] = await Promise.all([signingKey(scratch.dir, 'trusted', 'ecdsa-p256'), signingKey(scratch.dir, 'other', 'ecdsa-p256'), signingKey(scratch.dir, 'ed', 'ed25519'), signingKey(scratch.dir, 'rsa', 'rsa'), signingKey(scratch.dir, 'rekor', 'ecdsa-p256'), signingKey(scratch.dir, 'other-rekor', 'ecdsa-p256')]);
    gnupg = path.join(scratch.dir, 'gnupg');
    fs.mkdirSync(gnupg, { mode: 0o700 });
    gpg = await gpgKey(gnupg, scratch.dir, 'gpg');
    registriesD = path.join(scratch.dir, 'registries.d');
    fs.mkdirSync(registriesD);
    fs.writeFileSync(path.join(registriesD, 'test.yaml'), `docker:\n  ${reg.host}:\n    lookaside: file://${path.join(scratch.dir, 'lookaside')}\n    use-sigstore-attachments: true\n`);
    const layout = path.join(scratch.dir, 'image');
    await umociImage(scratch.dir, layout, '1', [{ add: { 'etc/os-release': 'ID=image\nVERSION_ID=1\n', 'usr/bin/tool': 'one\n' } }], { arch: hostPlatform().architecture });
    digest = manifestOf(layout).digest;
    const push = (repo: string, fpr?: string) => tool('skopeo', ['--insecure-policy', '--registries.d', registriesD, 'copy', '--quiet', '--dest-cert-dir', path.join(reg.certsDir, reg.host), ...(fpr ? ['--sign-by', fpr] : []), `oci:${layout}:1`, `docker://${reg.host}/${repo}:1`], { env: { GNUPGHOME: gnupg } });
    for (const repo of ['os/good', 'os/unsigned', 'os/other', 'os/digest', 'os/named', 'os/corrupt', 'os/keys', 'os/rekor', 'os/rekor-bad']) await push(repo);
    await push('os/both', gpg.fpr);
    await push('os/gpgonly', gpg.fpr);
    const sig = async (key: SigningKey, repo: string, o: { digest?: string; identity?: string; optional?: Record<string, unknown> } = {}) => {
      const payload = cosignPayload(o.digest ?? digest, o.identity ?? `${reg.host}/${repo}:1`, o.optional ?? null);
      return { payload, signature: await signPayload(key, payload, scratch.dir) };
    };
    await pushAttachment(reg, scratch.dir, 'os/good', digest, [await sig(trusted, 'os/good')]);
    await pushAttachment(reg, scratch.dir, 'os/other', digest, [await sig(other, 'os/other')]);
    await pushAttachment(reg, scratch.dir, 'os/digest', digest, [await sig(trusted, 'os/digest', { digest: otherDigest }), await sig(other, 'os/digest')]);
    // cosign sign records the repository alone, no tag
    await pushAttachment(reg, scratch.dir, 'os/named', digest, [await sig(trusted, 'os/named', { identity: `${reg.host}/os/named` })]);
    const damaged = await sig(trusted, 'os/corrupt', { optional: { creator: 'the corrupt case' } });
    await pushAttachment(reg, scratch.dir, 'os/corrupt', digest, [damaged]);
    damageBlob(reg, `sha256:${(await import('node:crypto')).createHash('sha256').update(damaged.payload).digest('hex')}`);
    await pushAttachment(reg, scratch.dir, 'os/keys', digest, [await sig(other, 'os/keys'), { mediaType: 'application/vnd.dsse.envelope.v1+json', data: Buffer.from('{}') }, await sig(rsa, 'os/keys'), await sig(ed, 'os/keys')]);
    await pushAttachment(reg, scratch.dir, 'os/both', digest, [await sig(trusted, 'os/both')]);
    // Logged in a Rekor (its key made with openssl): a good SET; one by another log's key, one logging another payload's hash.
    const logged = async (repo: string, log: SigningKey, o: { payloadHash?: string } = {}) => {
      const s = await sig(trusted, repo);
      return { ...s, bundle: await rekorBundle(log, trusted.pub, s.signature, s.payload, scratch.dir, o) };
    };
    await pushAttachment(reg, scratch.dir, 'os/rekor', digest, [await logged('os/rekor', rekor)]);
    await pushAttachment(reg, scratch.dir, 'os/rekor-bad', digest, [await logged('os/rekor-bad', otherRekor), await logged('os/rekor-bad', rekor, { payloadHash: '0'.repeat(64) })]);
    // A mirror of a source that is down (nothing listens there): the signature names the source.
    down = `127.0.0.1:${await freePort()}`;
    await push('mirror/os/good');
    await pushAttachment(reg, scratch.dir, 'mirror/os/good', digest, [await sig(trusted, 'mirror/os/good', { identity: `${down}/os/good:1` })]);
    auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), {});
  }, 180_000);

  let n = 0;
  const policyFile = (scoped: unknown[]): string => {
    const p = path.join(scratch.dir, `policy-${++n}.json`);
    fs.writeFileSync(p, JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: { [`${reg.host}/os`]: scoped } } }));
    return p;
  };
  const sigstoreSigned = (keys: Record<string, unknown>, signedIdentity?: unknown) => ({ type: 'sigstoreSigned', ...keys, ...(signedIdentity ? { signedIdentity } : {}) });
  const stage = async (repo: string, policy: string, o: { registriesD?: string; host?: string; registriesConf?: string } = {}) => {
    t?.cleanup();
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'blobs');
    const conf = o.registriesConf ? ['--registries-conf', o.registriesConf] : [];
    const r = await cli(['stage', `docker://${o.host ?? reg.host}/${repo}:1`, '--policy', policy, '--registries-d', o.registriesD ?? registriesD, ...conf, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir, '--json']);
    const layer = manifestOf(path.join(scratch.dir, 'image')).json.layers[0]!;
    return { r, layerFetched: fs.existsSync(path.join(blobDir, 'blobs', ...layer.digest.split(':'))) };
  };
  const staged = () => {
    const st = t!.sysroot.status();
    return st.deployments.find((x) => x.id === st.staged);
  };
  const refused = async (repo: string, policy: string, why: string, o: { registriesD?: string } = {}) => {
    const { r, layerFetched } = await stage(repo, policy, o);
    expect(r.code, r.out + r.err).toBe(3);
    const e = JSON.parse(r.out).error as { code: string; message: string };
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(e.message).toContain(`${reg.host}/${repo}:1 (${digest}) is refused by the policy ${policy} (transports.docker["${reg.host}/os"]): it requires`);
    expect(e.message).toContain(why);
    expect(layerFetched).toBe(false);
    expect(t!.sysroot.status().staged).toBeNull();
    expect(t!.sysroot.status().lastFailure).toMatchObject({ code: 'SIGNATURE_INVALID' });
    return e.message;
  };

  it("an image signed by the policy's key is staged; the deployment says which key (keyPath, and the same key as keyData)", async () => {
    const { r } = await stage('os/good', policyFile([sigstoreSigned({ keyPath: trusted.pub })]));
    expect(r.code, r.out + r.err).toBe(0);
    expect(staged()?.origin?.digest).toBe(digest);
    expect(staged()?.source).toMatch(new RegExp(`signed by the sigstore key ${trusted.pub} \\(sha256:[0-9a-f]{64}\\) \\(transports\\.docker\\["${reg.host.replace(/\./g, '\\.')}/os"\\]\\)`));
    const asData = await stage('os/good', policyFile([sigstoreSigned({ keyData: fs.readFileSync(trusted.pub).toString('base64') })]));
    expect(asData.r.code, asData.r.err).toBe(0);
    expect(staged()?.source).toContain('signed by the sigstore key keyData (sha256:');
  });

  it.each([
    ['os/unsigned', (tag: string) => `it has no sigstore signature (no attachment ${tag} in HOST/os/unsigned)`],
    ['os/other', () => '1 signature: signature 1 is not by that key'],
    ['os/digest', () => `2 signatures: signature 1 signs ${otherDigest}, not DIGEST; signature 2 is not by that key`],
    ['os/named', () => '1 signature: signature 1 is for "HOST/os/named", which matchRepoDigestOrExact does not accept for HOST/os/named:1'],
  ])('%s is refused before any layer is fetched: exit 3, SIGNATURE_INVALID saying what was expected', async (repo, why) => {
    const tag = `${digest.replace(':', '-')}.sig`;
    await refused(repo, policyFile([sigstoreSigned({ keyPath: trusted.pub })]), `it requires a sigstore signature by ${trusted.pub} (matchRepoDigestOrExact), and ${why(tag).replaceAll('HOST', reg.host).replace('DIGEST', digest)}`);
  });

  it('a signature naming the repository alone: matchExact and another exactReference refuse it, matchRepository and exactRepository accept it', async () => {
    await refused('os/named', policyFile([sigstoreSigned({ keyPath: trusted.pub }, { type: 'matchExact' })]), `it requires a sigstore signature by ${trusted.pub} (matchExact), and 1 signature: signature 1 is for "${reg.host}/os/named", which matchExact does not accept`);
    await refused('os/named', policyFile([sigstoreSigned({ keyPath: trusted.pub }, { type: 'exactReference', dockerReference: `${reg.host}/os/good:1` })]), 'which exactReference does not accept');
    expect((await stage('os/named', policyFile([sigstoreSigned({ keyPath: trusted.pub }, { type: 'matchRepository' })]))).r.code).toBe(0);
    expect((await stage('os/named', policyFile([sigstoreSigned({ keyPath: trusted.pub }, { type: 'exactRepository', dockerRepository: `${reg.host}/os/named` })]))).r.code).toBe(0);
  });

  it('a payload the registry serves damaged (its digest does not match) does not count', async () => {
    const message = await refused('os/corrupt', policyFile([sigstoreSigned({ keyPath: trusted.pub })]), `it requires a sigstore signature by ${trusted.pub} (matchRepoDigestOrExact), and 1 signature: signature 1 has a payload that cannot be used: blob sha256:`);
    expect(message).toMatch(/does not match its digest: its content hashes to sha256:[0-9a-f]{64}/);
  });

  it('any one signature by any of the keys is enough, other attachments are skipped: RSA (keyPaths) and Ed25519 (keyDatas)', async () => {
    expect((await stage('os/keys', policyFile([sigstoreSigned({ keyPaths: [trusted.pub, rsa.pub] })]))).r.code).toBe(0);
    expect(staged()?.source).toContain(`signed by the sigstore key ${rsa.pub} (sha256:`);
    expect((await stage('os/keys', policyFile([sigstoreSigned({ keyDatas: [fs.readFileSync(ed.pub).toString('base64')] })]))).r.code).toBe(0);
    expect(staged()?.source).toContain('signed by the sigstore key keyData (sha256:');
    await refused('os/keys', policyFile([sigstoreSigned({ keyPath: trusted.pub })]), '3 signatures: signature 1 is not by that key; signature 2 is not by that key; signature 3 is not by that key');
  });

  it('signedBy and sigstoreSigned together: both must hold, both keys are said', async () => {
    const both = policyFile([{ type: 'signedBy', keyType: 'GPGKeys', keyPath: gpg.pub }, sigstoreSigned({ keyPath: trusted.pub })]);
    const { r } = await stage('os/both', both);
    expect(r.code, r.out + r.err).toBe(0);
    expect(staged()?.source).toContain(`signed by ${gpg.fpr}, the sigstore key ${trusted.pub} (sha256:`);
    await refused('os/good', both, `it requires a signature by ${gpg.pub} (matchRepoDigestOrExact), and it has no signature`);
    await refused('os/gpgonly', both, `it requires a sigstore signature by ${trusted.pub} (matchRepoDigestOrExact), and it has no sigstore signature (no attachment`);
  });

  it('with a Rekor key in the policy each signature needs a SET by it (offline): logged is accepted; none, another log\'s or of another payload is refused', async () => {
    const withRekor = policyFile([sigstoreSigned({ keyPath: trusted.pub, rekorPublicKeyPath: rekor.pub })]);
    const { r } = await stage('os/rekor', withRekor);
    expect(r.code, r.out + r.err).toBe(0);
    expect(staged()?.source).toContain(`signed by the sigstore key ${trusted.pub} (sha256:`);
    const expected = `it requires a sigstore signature by ${trusted.pub}, logged in Rekor (matchRepoDigestOrExact), and `;
    await refused('os/good', withRekor, `${expected}1 signature: signature 1 has no dev.sigstore.cosign/bundle annotation (the Rekor SET the policy asks for)`);
    await refused('os/rekor-bad', withRekor, `${expected}2 signatures: signature 1's Rekor SET is not signed by the policy's Rekor key; signature 2's Rekor SET logs the hash of another payload`);
    // the same signatures without a Rekor key in the policy: the SET is not looked at
    expect((await stage('os/rekor-bad', policyFile([sigstoreSigned({ keyPath: trusted.pub })]))).r.code).toBe(0);
  });

  it('keyless signing (fulcio) is refused as unsupported; a requirement with two keys is a policy error', async () => {
    const fulcio = policyFile([{ type: 'sigstoreSigned', fulcio: { caPath: '/etc/fulcio.pem', oidcIssuer: 'https://issuer', subjectEmail: 'a@b' }, rekorPublicKeyPath: '/etc/rekor.pub' }]);
    await refused('os/good', fulcio, 'it requires a sigstore signature checked with fulcio, which stagedroot does not verify (keyless signing: a certificate from Fulcio or another CA)');
    const two = policyFile([sigstoreSigned({ keyPath: trusted.pub, keyData: 'AAAA' })]);
    const { r } = await stage('os/good', two);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.out).error).toMatchObject({ code: 'SIGNATURE_INVALID', message: expect.stringContaining(`${two}: transports.docker["${reg.host}/os"][0]: sigstoreSigned has keyPath and keyData: it takes exactly one of keyPath, keyPaths, keyData, keyDatas`) });
  });

  it('without use-sigstore-attachments for the registry there is nothing to read: refused, saying so', async () => {
    const plain = path.join(scratch.dir, 'registries.d-plain');
    fs.mkdirSync(plain, { recursive: true });
    fs.writeFileSync(path.join(plain, 'default.yaml'), 'default-docker:\n  use-sigstore-attachments: true\n');
    fs.writeFileSync(path.join(plain, 'host.yaml'), `docker:\n  ${reg.host}/os:\n    use-sigstore-attachments: false\n`);
    await refused('os/good', policyFile([sigstoreSigned({ keyPath: trusted.pub })]), `it requires a sigstore signature by ${trusted.pub} (matchRepoDigestOrExact), and ${path.join(plain, 'host.yaml')} says use-sigstore-attachments: false for ${reg.host}/os/good:1`, { registriesD: plain });
  });

  it("through a mirror: the attachment is read from the mirror that served the image, registries.d asked about the mirror's name, the identity checked against the name asked for", async () => {
    const conf = mirrorConf(path.join(scratch.dir, 'mirror.conf'), `${down}/os`, `${reg.host}/mirror/os`);
    const policy = path.join(scratch.dir, 'mirror-policy.json');
    fs.writeFileSync(policy, JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: { [`${down}/os`]: [sigstoreSigned({ keyPath: trusted.pub })] } } }));
    const { r } = await stage('os/good', policy, { host: down, registriesConf: conf });
    expect(r.code, r.out + r.err).toBe(0);
    expect(staged()?.origin).toMatchObject({ digest, pullspec: `${down}/os/good:1`, mirror: `${reg.host}/mirror/os/good` });
    expect(staged()?.source).toContain(`signed by the sigstore key ${trusted.pub} (sha256:`);
  });
});
