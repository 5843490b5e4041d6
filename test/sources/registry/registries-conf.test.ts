/**
 * registries.conf (v2): its tables read and merged, the endpoints a reference is pulled
 * from in order; and pulls through mirrors against real registries (docker-registry 2.8)
 * on loopback: a source and a mirror with TLS, a plain-http mirror marked insecure, and a
 * mirror that is down. A mirror that fails falls through to the next, then to the source;
 * the origin says which endpoint served the pull.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { hostPlatform } from '../../../src/sources/oci/platform.js';
import { parsePullspec } from '../../../src/sources/registry/reference.js';
import { endpointsFor, loadRegistriesConf, parseRegistriesConf, type RegistriesConf } from '../../../src/sources/registry/registries-conf.js';
import type { TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { tool } from '../../helpers/tools.js';
import { manifestOf, umociImage } from '../oci/oci-helpers.js';
import { freePort, push, writeAuthFile, withRegistryScratch, type TestRegistry } from './registry-helpers.js';

const conf = (text: string, file = 'registries.conf'): RegistriesConf => ({ registries: parseRegistriesConf(text, file), files: [file] });
const names = (c: RegistriesConf | null, spec: string) => endpointsFor(c, parsePullspec(spec)).map((e) => `${e.mirror ? 'mirror' : 'source'} ${e.ref.registry}/${e.ref.repository}${e.ref.digest ? '@…' : `:${e.ref.tag}`}${e.insecure ? ' insecure' : ''}`);
const DIGEST = `sha256:${'a'.repeat(64)}`;

describe('registries.conf (v2)', () => {
  it('mirrors in order, then the source; pull-from-mirror digest-only and tag-only; the prefix replaced by each location', () => {
    const c = conf(`
unqualified-search-registries = ["quay.io"]
[[registry]]
prefix = "quay.io/openshift-release-dev"
location = "quay.io/openshift-release-dev"
[[registry.mirror]]
location = "mirror.local:5000/ocp"
pull-from-mirror = "digest-only"
[[registry.mirror]]
location = "tags.local/ocp"
pull-from-mirror = "tag-only"
insecure = true
[[registry.mirror]]
location = "any.local/all"
`);
    expect(names(c, `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`)).toEqual(['mirror mirror.local:5000/ocp/ocp-v4.0-art-dev@…', 'mirror any.local/all/ocp-v4.0-art-dev@…', 'source quay.io/openshift-release-dev/ocp-v4.0-art-dev@…']);
    expect(names(c, 'quay.io/openshift-release-dev/ocp-v4.0-art-dev:4.16')).toEqual(['mirror tags.local/ocp/ocp-v4.0-art-dev:4.16 insecure', 'mirror any.local/all/ocp-v4.0-art-dev:4.16', 'source quay.io/openshift-release-dev/ocp-v4.0-art-dev:4.16']);
    // another repository, a prefix that is only a string prefix: not matched
    expect(names(c, 'quay.io/openshift-release-devx/x:1')).toEqual(['source quay.io/openshift-release-devx/x:1']);
    expect(names(null, 'quay.io/a/b:1')).toEqual(['source quay.io/a/b:1']);
  });

  it('the longest prefix wins, a plain one before a wildcard; location moves the source; mirror-by-digest-only; blocked refuses', () => {
    const c = conf(`
[[registry]]
prefix = "*.example.com"
[[registry.mirror]]
location = "wild.local"
[[registry]]
prefix = "reg.example.com/team"
location = "internal.local/team"
mirror-by-digest-only = true
[[registry.mirror]]
location = "m.local/team"
[[registry]]
location = "bad.example.org"
blocked = true
`);
    expect(names(c, 'reg.example.com/team/app:1')).toEqual(['source internal.local/team/app:1']);
    expect(names(c, `reg.example.com/team/app@${DIGEST}`)).toEqual(['mirror m.local/team/app@…', 'source internal.local/team/app@…']);
    expect(names(c, 'x.example.com/other/app:1')).toEqual(['mirror wild.local/other/app:1', 'source x.example.com/other/app:1']);
    expect(() => endpointsFor(c, parsePullspec('bad.example.org/os:1'))).toThrow(/bad\.example\.org\/os: the registry bad\.example\.org is blocked \(blocked = true in registries\.conf\)/);
  });

  it('refuses what it cannot read, naming the file: not TOML, version 1, a bad pull-from-mirror, a wildcard with a location', () => {
    const bad = (text: string) => {
      try {
        parseRegistriesConf(text, '/etc/containers/registries.conf');
      } catch (e) {
        expect(e).toBeInstanceOf(StagedrootError);
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(bad('[[registry]\n')).toMatch(/^\/etc\/containers\/registries\.conf: not TOML/);
    expect(bad('[registries.search]\nregistries = ["quay.io"]\n')).toContain('a version 1 registries.conf');
    expect(bad('[[registry]]\nlocation = "a.io"\n[[registry.mirror]]\nlocation = "m.io"\npull-from-mirror = "sometimes"\n')).toContain('[[registry]] #1, mirror #1: pull-from-mirror must be all, digest-only or tag-only, not "sometimes"');
    expect(bad('[[registry]]\nprefix = "*.a.io"\nlocation = "b.io"\n')).toContain('a wildcard prefix (*.a.io) takes no location');
    expect(bad('[[registry]]\ninsecure = "yes"\nlocation = "a.io"\n')).toContain('insecure must be true or false');
  });

  it('reads the file and then its drop-ins in name order, a later entry with the same prefix replacing an earlier one; --registries-conf alone', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-regconf-'));
    try {
      const main = path.join(dir, 'registries.conf');
      fs.writeFileSync(main, '[[registry]]\nlocation = "a.io"\n[[registry.mirror]]\nlocation = "old.local"\n[[registry]]\nlocation = "b.io"\nblocked = true\n');
      fs.mkdirSync(path.join(dir, 'registries.conf.d'));
      fs.writeFileSync(path.join(dir, 'registries.conf.d', '50-a.conf'), '[[registry]]\nlocation = "a.io"\n[[registry.mirror]]\nlocation = "new.local"\n');
      fs.writeFileSync(path.join(dir, 'registries.conf.d', '10-shortnames.conf'), '[aliases]\n"os" = "a.io/os"\n');
      fs.writeFileSync(path.join(dir, 'registries.conf.d', 'README'), 'not read');
      const c = await loadRegistriesConf({ mainFile: main, dropInDir: path.join(dir, 'registries.conf.d') });
      expect(c.files).toEqual([main, path.join(dir, 'registries.conf.d', '10-shortnames.conf'), path.join(dir, 'registries.conf.d', '50-a.conf')]);
      expect(names(c, 'a.io/os:1')).toEqual(['mirror new.local/os:1', 'source a.io/os:1']);
      expect(() => names(c, 'b.io/os:1')).toThrow(/blocked/);
      const alone = await loadRegistriesConf({ file: path.join(dir, 'registries.conf.d', '50-a.conf') });
      expect(alone.files).toEqual([path.join(dir, 'registries.conf.d', '50-a.conf')]);
      await expect(loadRegistriesConf({ file: path.join(dir, 'nowhere.conf') })).rejects.toMatchObject({ code: 'USAGE' });
      expect((await loadRegistriesConf({ mainFile: path.join(dir, 'none'), dropInDir: path.join(dir, 'none.d') })).registries).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('pulls through mirrors (real registries on loopback)', () => {
  const scratch = withRegistryScratch('stagedroot-mirrors-');
  let source: TestRegistry;
  let mirror: TestRegistry;
  let plain: TestRegistry;
  let down: string;
  let certsDir: string;
  let auth: string;
  let digest: string;
  let t: TempSysroot | null = null;

  beforeAll(async () => {
    [source, mirror, plain] = await Promise.all([scratch.startRegistry('source'), scratch.startRegistry('mirror'), scratch.startRegistry('plain', { tls: false })]);
    down = `127.0.0.1:${await freePort()}`; // nothing listens there
    certsDir = path.join(scratch.dir, 'certs.d');
    for (const r of [source, mirror]) fs.cpSync(path.join(r.certsDir, r.host), path.join(certsDir, r.host), { recursive: true });
    const layout = path.join(scratch.dir, 'image');
    await umociImage(scratch.dir, layout, '1', [{ add: { 'etc/os-release': 'ID=image\nVERSION_ID=1\n', 'usr/bin/tool': 'one\n' } }], { arch: hostPlatform().architecture, labels: { 'org.opencontainers.image.version': '1' } });
    digest = manifestOf(layout).digest;
    await push(source, layout, 'os/node:1');
    await push(mirror, layout, 'mirrored/os/node:1');
    await tool('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}:1`, `docker://${plain.host}/plain/os/node:1`]);
    auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), {});
  }, 120_000);

  /** A registries.conf for the source's os/ with these mirrors (location, and extra lines). */
  const confFile = (name: string, mirrors: string[][], extra = ''): string => {
    const p = path.join(scratch.dir, `${name}.conf`);
    fs.writeFileSync(p, `[[registry]]\nprefix = "${source.host}/os"\nlocation = "${source.host}/os"\n${extra}` + mirrors.map(([loc, ...lines]) => `[[registry.mirror]]\nlocation = "${loc}"\n${lines.join('\n')}\n`).join(''));
    return p;
  };
  const stage = async (file: string, ref = `docker://${source.host}/os/node:1`, json = true) => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const r = await cli(['stage', ref, '--registries-conf', file, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', certsDir, '--blob-dir', path.join(t.scratch, 'blobs'), ...(json ? ['--json'] : [])]);
    const st = t.sysroot.status();
    return { r, origin: st.deployments.find((d) => d.id === st.staged)?.origin };
  };

  it('the mirror serves the pull: the origin keeps the source\'s pullspec, the mirror\'s origin and repository', async () => {
    const { r, origin } = await stage(confFile('one', [[`${mirror.host}/mirrored/os`]]));
    expect(r.code, r.err).toBe(0);
    expect(origin).toMatchObject({ digest, pullspec: `${source.host}/os/node:1`, registry: `https://${mirror.host}`, mirror: `${mirror.host}/mirrored/os/node` });
    expect(JSON.stringify(t!.sysroot.status())).toContain(`pulled from https://${mirror.host} (the mirror ${mirror.host}/mirrored/os/node)`);
  });

  it('a mirror that is down and one without the image fall through to the next mirror, each said on stderr', async () => {
    const { r, origin } = await stage(confFile('fall', [[`${down}/os`], [`${mirror.host}/nothing-here`], [`${mirror.host}/mirrored/os`]]), undefined, false);
    expect(r.code, r.err).toBe(0);
    expect(origin).toMatchObject({ registry: `https://${mirror.host}`, mirror: `${mirror.host}/mirrored/os/node` });
    expect(r.err).toContain(`stagedroot: warning: the mirror ${down}/os/node:1 failed (${down}/os/node:1: the manifest (tag 1): ${down}: ECONNREFUSED (after 1 attempts)); trying the next`);
    expect(r.err).toContain(`stagedroot: warning: the mirror ${mirror.host}/nothing-here/node:1 failed (`);
    expect(r.err).toContain('(404)');
  });

  it('every mirror failing: the source serves it (no mirror in the origin); with --json the failures are progress lines', async () => {
    const { r, origin } = await stage(confFile('source', [[`${down}/os`]]));
    expect(r.code, r.err).toBe(0);
    expect(origin).toMatchObject({ pullspec: `${source.host}/os/node:1`, registry: `https://${source.host}` });
    expect(origin).not.toHaveProperty('mirror');
    const lines = r.err.trim().split('\n').map((l) => JSON.parse(l) as { progress: string; mirror?: string; code?: string });
    expect(lines[0]).toMatchObject({ progress: 'mirror-failed', mirror: `${down}/os/node:1`, code: 'REGISTRY_FAILED' });
  });

  it('pull-from-mirror digest-only: a tag comes from the source, a digest from the mirror', async () => {
    const file = confFile('digest-only', [[`${mirror.host}/mirrored/os`, 'pull-from-mirror = "digest-only"']]);
    expect((await stage(file)).origin).toMatchObject({ registry: `https://${source.host}` });
    t!.cleanup();
    const byDigest = await stage(file, `docker://${source.host}/os/node@${digest}`);
    expect(byDigest.r.code, byDigest.r.err).toBe(0);
    expect(byDigest.origin).toMatchObject({ digest, pullspec: `${source.host}/os/node@${digest}`, mirror: `${mirror.host}/mirrored/os/node` });
  });

  it('an insecure mirror that speaks plain http serves it over http; the same mirror not marked insecure is skipped', async () => {
    const insecure = await stage(confFile('insecure', [[`${plain.host}/plain/os`, 'insecure = true']]));
    expect(insecure.r.code, insecure.r.err).toBe(0);
    expect(insecure.origin).toMatchObject({ registry: `http://${plain.host}`, mirror: `${plain.host}/plain/os/node` });
    t!.cleanup();
    const strict = await stage(confFile('strict', [[`${plain.host}/plain/os`]]));
    expect(strict.r.code, strict.r.err).toBe(0);
    expect(strict.origin).toMatchObject({ registry: `https://${source.host}` });
  });

  it('an insecure TLS mirror whose CA is not known is used unverified; the same mirror not marked insecure fails through to the source', async () => {
    const noMirrorCa = path.join(scratch.dir, 'certs-source-only');
    fs.cpSync(path.join(source.certsDir, source.host), path.join(noMirrorCa, source.host), { recursive: true });
    const run = async (file: string) => {
      t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
      const r = await cli(['stage', `docker://${source.host}/os/node:1`, '--registries-conf', file, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', noMirrorCa, '--blob-dir', path.join(t.scratch, 'blobs')]);
      const st = t.sysroot.status();
      return { r, origin: st.deployments.find((d) => d.id === st.staged)?.origin };
    };
    const insecure = await run(confFile('tls-insecure', [[`${mirror.host}/mirrored/os`, 'insecure = true']]));
    expect(insecure.r.code, insecure.r.err).toBe(0);
    expect(insecure.origin).toMatchObject({ registry: `https://${mirror.host}`, mirror: `${mirror.host}/mirrored/os/node` });
    t!.cleanup();
    const verified = await run(confFile('tls-verified', [[`${mirror.host}/mirrored/os`]]));
    expect(verified.r.code, verified.r.err).toBe(0);
    expect(verified.origin).toMatchObject({ registry: `https://${source.host}` });
    expect(verified.r.err).toContain(`the TLS certificate of ${mirror.host} cannot be verified`);
  });

  it('a blocked registry is refused before anything is fetched: REGISTRY_FAILED (exit 1) naming the file; --check too', async () => {
    const file = confFile('blocked', [], 'blocked = true\n');
    const { r } = await stage(file);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).error).toMatchObject({ code: 'REGISTRY_FAILED', message: `${source.host}/os/node: the registry ${source.host}/os is blocked (blocked = true in ${file})` });
    expect(fs.existsSync(path.join(t!.scratch, 'blobs'))).toBe(false);
    const check = await cli(['stage', `docker://${source.host}/os/node:1`, '--check', '--registries-conf', file, '--sysroot', t!.dir, '--authfile', auth, '--certs-dir', certsDir]);
    expect(check.code).toBe(1);
    const ok = await cli(['stage', `docker://${source.host}/os/node:1`, '--check', '--json', '--registries-conf', confFile('check', [[`${mirror.host}/mirrored/os`]]), '--sysroot', t!.dir, '--authfile', auth, '--certs-dir', certsDir, '--blob-dir', path.join(t!.scratch, 'b')]);
    expect(JSON.parse(ok.out)).toMatchObject({ registry: `https://${mirror.host}`, mirror: `${mirror.host}/mirrored/os/node`, digest });
  });
});
