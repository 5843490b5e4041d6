/**
 * containers-policy.json against a real registry (docker-registry 2.8 with TLS): images
 * signed by the real skopeo (`copy --sign-by`, GPG simple signing into a lookaside that
 * registries.d names), verified with gpg before any layer is fetched; an unsigned,
 * wrongly signed or wrongly named image and a `reject` scope are refused (exit 3,
 * SIGNATURE_INVALID naming the image and what was expected), nothing staged. Through a
 * mirror, the signatures are read from the lookaside registries.d names for the mirror,
 * under its repository, and their identity checked against the name asked for. With no
 * lookaside configured, containers/image's built-in default is read (a test's own
 * directory in its place: nothing is written to the host's /var/lib/containers/sigstore).
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { hostPlatform } from '../../../src/sources/oci/platform.js';
import { findAuthFile } from '../../../src/sources/registry/auth-file.js';
import { parsePolicy, requirementsFor, scopesOf } from '../../../src/sources/registry/policy.js';
import { pullImage } from '../../../src/sources/registry/pull.js';
import { parseDockerReference, parsePullspec } from '../../../src/sources/registry/reference.js';
import { builtinLookasideDir, ROOT_LOOKASIDE } from '../../../src/sources/registry/registries-d.js';
import type { TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { tool } from '../../helpers/tools.js';
import { manifestOf, umociImage } from '../oci/oci-helpers.js';
import { freePort, gpgKey, mirrorConf, writeAuthFile, withRegistryScratch, type TestRegistry } from './registry-helpers.js';

describe('policy scopes', () => {
  it('most specific first: the reference, the repository, its namespaces, the host, wildcard domains, the transport default', () => {
    expect(scopesOf(parsePullspec('quay.io/ns/sub/repo:1'))).toEqual(['quay.io/ns/sub/repo:1', 'quay.io/ns/sub/repo', 'quay.io/ns/sub', 'quay.io/ns', 'quay.io', '*.io', '']);
    const p = parsePolicy(JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: { 'quay.io/ns': [{ type: 'insecureAcceptAnything' }], '*.example.com': [{ type: 'reject' }] } } }), 'policy.json');
    expect(requirementsFor(p, parsePullspec('quay.io/ns/repo@sha256:' + 'a'.repeat(64)))).toMatchObject({ scope: 'transports.docker["quay.io/ns"]', reqs: [{ type: 'insecureAcceptAnything' }] });
    expect(requirementsFor(p, parsePullspec('reg.example.com/x:1')).scope).toBe('transports.docker["*.example.com"]');
    expect(requirementsFor(p, parsePullspec('other.io/x:1')).scope).toBe('default');
    expect(() => parsePolicy('{"default": []}', 'p.json')).toThrow(/p\.json: default must be a non-empty array/);
    expect(() => parsePolicy('{"default": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "k", "signedIdentity": {"type": "remapIdentity"}}]}', 'p.json')).toThrow(/remapIdentity" is not supported/);
  });
});

describe('signature policies (GPG simple signing, real skopeo and gpg)', () => {
  const scratch = withRegistryScratch('stagedroot-policy-');
  let reg: TestRegistry;
  let auth: string;
  let gnupg: string;
  let trusted: { fpr: string; pub: string };
  let other: { fpr: string; pub: string };
  let registriesD: string;
  let digest: string;
  let down: string;
  let t: TempSysroot | null = null;

  /** skopeo copy to REPO:TAG, signed by `fpr` (the signature into the lookaside), with --sign-identity when given. */
  async function pushAs(repoTag: string, o: { fpr?: string; identity?: string } = {}): Promise<void> {
    await tool('skopeo', ['--insecure-policy', '--registries.d', registriesD, 'copy', '--quiet', '--dest-cert-dir', path.join(reg.certsDir, reg.host), ...(o.fpr ? ['--sign-by', o.fpr] : []), ...(o.identity ? ['--sign-identity', o.identity] : []), `oci:${path.join(scratch.dir, 'image')}:1`, `docker://${reg.host}/${repoTag}`], { env: { GNUPGHOME: gnupg } });
  }

  beforeAll(async () => {
    gnupg = path.join(scratch.dir, 'gnupg');
    fs.mkdirSync(gnupg, { mode: 0o700 });
    reg = await scratch.startRegistry('registry');
    trusted = await gpgKey(gnupg, scratch.dir, 'trusted');
    other = await gpgKey(gnupg, scratch.dir, 'other');
    registriesD = path.join(scratch.dir, 'registries.d');
    fs.mkdirSync(registriesD);
    fs.writeFileSync(path.join(registriesD, 'test.yaml'), `docker:\n  ${reg.host}:\n    lookaside: file://${path.join(scratch.dir, 'sigstore')}\n`);
    const layout = path.join(scratch.dir, 'image');
    await umociImage(scratch.dir, layout, '1', [{ add: { 'etc/os-release': 'ID=image\nVERSION_ID=1\n', 'usr/bin/tool': 'one\n' } }], { arch: hostPlatform().architecture });
    digest = manifestOf(layout).digest;
    await pushAs('os/signed:1', { fpr: trusted.fpr });
    await pushAs('os/unsigned:1');
    await pushAs('os/other:1', { fpr: other.fpr });
    await pushAs('os/renamed:1', { fpr: trusted.fpr, identity: `${reg.host}/os/elsewhere:1` });
    // A mirror of a source that is down (nothing listens there): one signature names the source, as its signer would; one the mirror (skopeo's default).
    down = `127.0.0.1:${await freePort()}`;
    await pushAs('mirror/os/signed:1', { fpr: trusted.fpr, identity: `${down}/os/signed:1` });
    await pushAs('mirror/os/renamed:1', { fpr: trusted.fpr });
    auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), {});
  }, 120_000);

  const policyFile = (name: string, scoped: unknown[], scope = `${reg.host}/os`): string => {
    const p = path.join(scratch.dir, `${name}.json`);
    fs.writeFileSync(p, JSON.stringify({ default: [{ type: 'reject' }], transports: { docker: { [scope]: scoped } } }));
    return p;
  };
  const signedBy = (key: string, signedIdentity?: unknown) => [{ type: 'signedBy', keyType: 'GPGKeys', keyPath: key, ...(signedIdentity ? { signedIdentity } : {}) }];
  const stage = async (repoTag: string, policy: string, verb: string[] = ['stage'], o: { host?: string; registriesD?: string; registriesConf?: string } = {}) => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'blobs');
    const conf = o.registriesConf ? ['--registries-conf', o.registriesConf] : [];
    const r = await cli([...verb, `docker://${o.host ?? reg.host}/${repoTag}`, '--policy', policy, '--registries-d', o.registriesD ?? registriesD, ...conf, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir, '--json']);
    const layer = manifestOf(path.join(scratch.dir, 'image')).json.layers[0]!;
    return { r, layerFetched: fs.existsSync(path.join(blobDir, 'blobs', ...layer.digest.split(':'))) };
  };

  it('an image signed by the policy\'s key is staged; the deployment says who signed it', async () => {
    const { r } = await stage('os/signed:1', policyFile('trusted', signedBy(trusted.pub)));
    expect(r.code, r.out + r.err).toBe(0);
    const st = t!.sysroot.status();
    const d = st.deployments.find((x) => x.id === st.staged)!;
    expect(d.origin?.digest).toBe(digest);
    expect(d.source).toContain(`signed by ${trusted.fpr} (transports.docker["${reg.host}/os"])`);
  });

  it.each([
    ['os/unsigned:1', 'it has no signature'],
    ['os/other:1', 'signature 1 is not by a key the policy names'],
    ['os/renamed:1', `signature 1 is for "${'HOST'}/os/elsewhere:1", which matchRepoDigestOrExact does not accept`],
  ])('%s is refused before any layer is fetched: exit 3, SIGNATURE_INVALID saying what was expected', async (repoTag, why) => {
    const policy = policyFile('trusted', signedBy(trusted.pub));
    const { r, layerFetched } = await stage(repoTag, policy);
    expect(r.code, r.out + r.err).toBe(3);
    const e = JSON.parse(r.out).error as { code: string; message: string };
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(e.message).toContain(`${reg.host}/${repoTag} (${digest}) is refused by the policy ${policy} (transports.docker["${reg.host}/os"]): it requires a signature by ${trusted.pub} (matchRepoDigestOrExact), and ${why.replace('HOST', reg.host)}`);
    expect(layerFetched).toBe(false);
    expect(t!.sysroot.status().staged).toBeNull();
    expect(t!.sysroot.status().lastFailure).toMatchObject({ code: 'SIGNATURE_INVALID' });
  });

  it('the renamed signature passes when the policy accepts that identity (exactReference); other keys pass with their own key', async () => {
    expect((await stage('os/renamed:1', policyFile('exact', signedBy(trusted.pub, { type: 'exactReference', dockerReference: `${reg.host}/os/elsewhere:1` })))).r.code).toBe(0);
    t!.cleanup();
    expect((await stage('os/other:1', policyFile('other', signedBy(other.pub)))).r.code).toBe(0);
  });

  it('reject refuses; insecureAcceptAnything accepts an unsigned image; the default applies outside the scope', async () => {
    const rejected = await stage('os/signed:1', policyFile('reject', [{ type: 'reject' }]));
    expect(rejected.r.code).toBe(3);
    expect(JSON.parse(rejected.r.out).error.message).toContain('it rejects every image of this scope');
    t!.cleanup();
    expect((await stage('os/unsigned:1', policyFile('accept', [{ type: 'insecureAcceptAnything' }]))).r.code).toBe(0);
    t!.cleanup();
    const p = path.join(scratch.dir, 'default-only.json');
    fs.writeFileSync(p, JSON.stringify({ default: [{ type: 'reject' }] }));
    const byDefault = await stage('os/signed:1', p);
    expect(byDefault.r.code).toBe(3);
    expect(JSON.parse(byDefault.r.out).error.message).toContain(`is refused by the policy ${p} (default)`);
  });

  it('signatures served over http from a default-docker lookaside are read the same way', async () => {
    const root = path.join(scratch.dir, 'sigstore');
    const server = http.createServer((req, res) => {
      const file = path.join(root, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
      if (!file.startsWith(root + path.sep) || !fs.existsSync(file)) return void res.writeHead(404).end();
      res.writeHead(200).end(fs.readFileSync(file));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const overHttp = path.join(scratch.dir, 'registries.d-http');
    fs.mkdirSync(overHttp, { recursive: true });
    fs.writeFileSync(path.join(overHttp, 'default.yaml'), `default-docker:\n  lookaside: http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
    try {
      t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
      const args = ['--policy', policyFile('trusted', signedBy(trusted.pub)), '--registries-d', overHttp, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', path.join(t.scratch, 'blobs')];
      const ok = await cli(['stage', `docker://${reg.host}/os/signed:1`, ...args]);
      expect(ok.code, ok.err).toBe(0);
      const refused = await cli(['stage', `docker://${reg.host}/os/unsigned:1`, ...args]);
      expect(refused.code).toBe(3);
      expect(refused.err).toContain('it has no signature');
    } finally {
      server.close();
    }
  });

  it('upgrade and switch are held to the policy too', async () => {
    const { r } = await stage('os/unsigned:1', policyFile('trusted', signedBy(trusted.pub)), ['switch']);
    expect(r.code, r.out + r.err).toBe(3);
    expect(JSON.parse(r.out).error.code).toBe('SIGNATURE_INVALID');
  });

  describe("no lookaside configured: containers/image's built-in default", () => {
    /** A registries.d directory holding FILE with `yaml`. */
    const registriesDWith = (name: string, yaml: string): string => {
      const d = path.join(scratch.dir, `registries.d-${name}`);
      fs.mkdirSync(d, { recursive: true });
      fs.writeFileSync(path.join(d, 'conf.yaml'), yaml);
      return d;
    };
    const pull = async (repoTag: string, policy: string, registriesD: string, defaultLookasideDir: string) =>
      pullImage(parseDockerReference(`docker://${reg.host}/${repoTag}`), path.join(scratch.dir, 'default-pulls'), { auth: await findAuthFile({ authfile: auth }), certsDir: reg.certsDir, registriesConf: null, policy, registriesD, defaultLookasideDir });
    const refusal = (p: Promise<unknown>) => p.then(() => expect.unreachable('not refused'), (e: unknown) => e as StagedrootError);

    it('the built-in default is /var/lib/containers/sigstore for root, $HOME/.local/share/containers/sigstore for another user (or _CONTAINERS_ROOTLESS_UID, as containers/image)', () => {
      expect(builtinLookasideDir({}, 0)).toBe(ROOT_LOOKASIDE);
      expect(ROOT_LOOKASIDE).toBe('/var/lib/containers/sigstore');
      expect(builtinLookasideDir({ HOME: '/home/u' }, 1000)).toBe('/home/u/.local/share/containers/sigstore');
      expect(builtinLookasideDir({ HOME: '/home/u', _CONTAINERS_ROOTLESS_UID: '1000' }, 0)).toBe('/home/u/.local/share/containers/sigstore');
      expect(builtinLookasideDir({ HOME: '/home/u', _CONTAINERS_ROOTLESS_UID: '0' }, 1000)).toBe(ROOT_LOOKASIDE);
      expect(builtinLookasideDir({ HOME: '/home/u', _CONTAINERS_ROOTLESS_UID: 'x' }, 1000)).toBe(ROOT_LOOKASIDE); // Go's Atoi error leaves 0
    });

    it('a signature in the default lookaside verifies (use-sigstore-attachments alone names no lookaside)', async () => {
      // skopeo wrote os/signed's signature into scratch/sigstore: that directory stands in for the default.
      const d = registriesDWith('attachments-only', 'default-docker:\n  use-sigstore-attachments: true\n');
      const p = await pull('os/signed:1', policyFile('trusted', signedBy(trusted.pub)), d, path.join(scratch.dir, 'sigstore'));
      expect(p.digest).toBe(digest);
    });

    it('none there: refused, naming the default path and that no registries.d file names a lookaside', async () => {
      const empty = registriesDWith('empty', '');
      const policy = policyFile('trusted', signedBy(trusted.pub));
      const none = path.join(scratch.dir, 'no-default-lookaside');
      const e = await refusal(pull('os/signed:1', policy, empty, none));
      expect(e.code).toBe('SIGNATURE_INVALID');
      expect(e.message).toContain(`${reg.host}/os/signed:1 (${digest}) is refused by the policy ${policy} (transports.docker["${reg.host}/os"]): it requires a signature by ${trusted.pub} (matchRepoDigestOrExact), and it has no signature (looked for in ${none}/os/signed@${digest.replace(':', '=')}/, the built-in default lookaside, as containers/image does: no file in ${empty} names a lookaside for ${reg.host}/os/signed:1)`);
      // A signature there by another key: its reason, at the default.
      const other = await refusal(pull('os/other:1', policy, empty, path.join(scratch.dir, 'sigstore')));
      expect(other.message).toContain(`and signature 1 is not by a key the policy names (ERRSIG) (looked for in ${path.join(scratch.dir, 'sigstore')}/os/other@`);
    });

    it('a configured lookaside wins over the default, even an empty one', async () => {
      const policy = policyFile('trusted', signedBy(trusted.pub));
      const elsewhere = registriesDWith('elsewhere', `docker:\n  ${reg.host}/os:\n    lookaside: file://${path.join(scratch.dir, 'empty-lookaside')}\n`);
      const e = await refusal(pull('os/signed:1', policy, elsewhere, path.join(scratch.dir, 'sigstore')));
      expect(e.message).toContain(`and it has no signature (looked for in file://${path.join(scratch.dir, 'empty-lookaside')}/os/signed@${digest.replace(':', '=')}/, the lookaside ${path.join(elsewhere, 'conf.yaml')} names for ${reg.host}/os/signed:1)`);
      expect((await pull('os/signed:1', policy, registriesD, path.join(scratch.dir, 'no-default-lookaside'))).digest).toBe(digest);
    });

    it("skopeo with no lookaside configured writes where we read (a rootless user's default, in the test's HOME)", async () => {
      const home = path.join(scratch.dir, 'home');
      const env = { HOME: home, _CONTAINERS_ROOTLESS_UID: '1000' };
      const empty = registriesDWith('skopeo-empty', '');
      await tool('skopeo', ['--insecure-policy', '--registries.d', empty, 'copy', '--quiet', '--dest-cert-dir', path.join(reg.certsDir, reg.host), '--sign-by', trusted.fpr, `oci:${path.join(scratch.dir, 'image')}:1`, `docker://${reg.host}/os/default:1`], { env: { GNUPGHOME: gnupg, ...env } });
      const dir = builtinLookasideDir(env, 0);
      expect(fs.existsSync(path.join(dir, `os/default@${digest.replace(':', '=')}`, 'signature-1'))).toBe(true);
      expect((await pull('os/default:1', policyFile('trusted', signedBy(trusted.pub)), empty, dir)).digest).toBe(digest);
    });
  });

  it("through a mirror: the lookaside registries.d names for the mirror is read, under the mirror's repository; the identity is checked against the name asked for", async () => {
    const conf = mirrorConf(path.join(scratch.dir, 'mirror.conf'), `${down}/os`, `${reg.host}/mirror/os`);
    // The source's own scope names a lookaside that holds nothing: only the mirror's scope leads to the signatures (skopeo wrote them under mirror/os/…).
    const viaMirror = path.join(scratch.dir, 'registries.d-mirror');
    fs.mkdirSync(viaMirror, { recursive: true });
    fs.writeFileSync(path.join(viaMirror, 'mirror.yaml'), `docker:\n  ${down}:\n    lookaside: file://${path.join(scratch.dir, 'empty-lookaside')}\n  ${reg.host}/mirror:\n    lookaside: file://${path.join(scratch.dir, 'sigstore')}\n`);
    const policy = policyFile('mirror', signedBy(trusted.pub), `${down}/os`);
    const o = { host: down, registriesD: viaMirror, registriesConf: conf };
    const { r } = await stage('os/signed:1', policy, ['stage'], o);
    expect(r.code, r.out + r.err).toBe(0);
    const st = t!.sysroot.status();
    const d = st.deployments.find((x) => x.id === st.staged)!;
    expect(d.origin).toMatchObject({ digest, pullspec: `${down}/os/signed:1`, mirror: `${reg.host}/mirror/os/signed` });
    expect(d.source).toContain(`signed by ${trusted.fpr} (transports.docker["${down}/os"])`);
    t!.cleanup();
    // Signed by the same key, but for the mirror's name (what skopeo records by default): not the image asked for.
    const renamed = await stage('os/renamed:1', policy, ['stage'], o);
    expect(renamed.r.code, renamed.r.out + renamed.r.err).toBe(3);
    expect(JSON.parse(renamed.r.out).error.message).toContain(`${down}/os/renamed:1 (${digest}) is refused by the policy ${policy} (transports.docker["${down}/os"]): it requires a signature by ${trusted.pub} (matchRepoDigestOrExact), and signature 1 is for "${reg.host}/mirror/os/renamed:1", which matchRepoDigestOrExact does not accept for ${down}/os/renamed:1`);
    expect(renamed.layerFetched).toBe(false);
    t!.cleanup();
    // No lookaside for the mirror: its built-in default is read, under the mirror's repository; refused, naming where it looked.
    const sourceOnly = path.join(scratch.dir, 'registries.d-source-only');
    fs.mkdirSync(sourceOnly, { recursive: true });
    fs.writeFileSync(path.join(sourceOnly, 'source.yaml'), `docker:\n  ${down}:\n    lookaside: file://${path.join(scratch.dir, 'sigstore')}\n`);
    const none = await stage('os/signed:1', policy, ['stage'], { ...o, registriesD: sourceOnly });
    expect(none.r.code, none.r.out + none.r.err).toBe(3);
    // (The CLI reads the real built-in default, which holds nothing for this image: nothing is written there.)
    expect(JSON.parse(none.r.out).error.message).toContain(`and it has no signature (looked for in ${builtinLookasideDir()}/mirror/os/signed@${digest.replace(':', '=')}/, the built-in default lookaside, as containers/image does: no file in ${sourceOnly} names a lookaside for ${reg.host}/mirror/os/signed:1)`);
  });
});
