/**
 * `upgrade` and `switch` against a real registry (docker-registry 2.8 with TLS): the
 * booted deployment's tracked reference pulled again (nothing when its digest did not
 * change), a switch to another reference that later upgrades follow, and `--check`.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { hostPlatform } from '../../src/sources/oci/platform.js';
import { Sysroot } from '../../src/sysroot.js';
import { reboot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { manifestOf, umociImage } from '../sources/oci/oci-helpers.js';
import { push, writeAuthFile, withRegistryScratch, type TestRegistry } from '../sources/registry/registry-helpers.js';

const scratch = withRegistryScratch('stagedroot-track-');
let reg: TestRegistry;
let auth: string;
const layouts: Record<string, string> = {};
const digests: Record<string, string> = {};

/** An image whose tree says its version; pushed as REPO:TAG. */
async function image(name: string, tag: string, version: string, payload = 'x'.repeat(200_000)): Promise<void> {
  const dir = path.join(scratch.dir, name);
  await umociImage(scratch.dir, dir, tag, [{ add: { 'etc/os-release': `ID=image\nVERSION_ID=${version}\n`, 'usr/bin/tool': `${version}\n`, [`usr/share/${name}`]: payload } }], { arch: hostPlatform().architecture, labels: { 'org.opencontainers.image.version': version } });
  layouts[name] = dir;
  digests[name] = manifestOf(dir).digest;
}

beforeAll(async () => {
  reg = await scratch.startRegistry('registry');
  await image('v1', 'stable', '1');
  await image('v2', 'stable', '2');
  await image('other', 'edge', '9', randomBytes(1_600_000).toString('base64')); // a layer over 2 MiB: progress lines on the way
  await push(reg, layouts.v1!, 'os/node:stable');
  await push(reg, layouts.other!, 'os/other:edge');
  auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), {}); // anonymous, and never the host's own files
}, 120_000);
let t: TempSysroot | null = null;

const layerOf = (name: string) => manifestOf(layouts[name]!).json.layers[0]!;

/** A sysroot booted into os/node:stable (v1), pulled from the registry. */
async function bootedOnStable(): Promise<{ t: TempSysroot; args: string[]; blobDir: string }> {
  const s = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
  const blobDir = path.join(s.scratch, 'blobs');
  const args = ['--sysroot', s.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir];
  const r = await cli(['switch', `docker://${reg.host}/os/node:stable`, ...args]);
  expect(r.code, r.err).toBe(0);
  await reboot(s.sysroot);
  return { t: s, args, blobDir };
}

describe('stagedroot upgrade', () => {
  it('nothing to do while the tag names the booted digest; a new digest behind the tag is checked, then staged; a second upgrade finds it staged', async () => {
    const b = await bootedOnStable();
    t = b.t;
    const booted = t.sysroot.status().booted;
    const same = await cli(['upgrade', ...b.args]);
    expect(same.code, same.err).toBe(0);
    expect(same.out).toBe(`the booted deployment ${booted} (1) already runs the image ${reg.host}/os/node:stable has now: nothing staged\n`);
    expect(t.sysroot.status().staged).toBeNull();

    await push(reg, layouts.v2!, 'os/node:stable'); // the tag moves
    const check = await cli(['upgrade', '--check', '--json', ...b.args]);
    expect(check.code, check.err).toBe(0);
    const layer = layerOf('v2');
    expect(JSON.parse(check.out)).toMatchObject({ ok: true, pullspec: `${reg.host}/os/node:stable`, digest: digests.v2, version: '2', against: booted, upToDate: false, bytesNeeded: layer.size, layers: [{ digest: layer.digest, present: false }] });
    expect(fs.existsSync(path.join(b.blobDir, 'blobs', ...layer.digest.split(':')))).toBe(false); // --check fetched no layer
    expect(t.sysroot.status().staged).toBeNull();

    const up = await cli(['upgrade', '--json', ...b.args]);
    expect(up.code, up.err).toBe(0);
    const r = JSON.parse(up.out) as { id: string; pullspec: string; alreadyRunning?: boolean };
    expect(r).toMatchObject({ ok: true, pullspec: `${reg.host}/os/node:stable` });
    const st = t.sysroot.status();
    expect(st.staged).toBe(r.id);
    expect(st.deployments.find((d) => d.id === r.id)!.origin).toMatchObject({ digest: digests.v2, pullspec: `${reg.host}/os/node:stable`, registry: `https://${reg.host}` });
    expect(fs.readFileSync(path.join(t.sysroot.treePath(r.id), 'usr/bin/tool'), 'utf8')).toBe('2\n');

    const again = await t.sysroot.upgrade({ pull: { authfile: auth, certsDir: reg.certsDir, blobDir: b.blobDir } });
    expect(again).toMatchObject({ id: r.id, alreadyStaged: true, pullspec: `${reg.host}/os/node:stable` });
    expect(t.sysroot.status().staged).toBe(r.id);
    expect((await cli(['upgrade', ...b.args])).out).toBe(`deployment ${r.id} (2) is staged with the image ${reg.host}/os/node:stable has now: nothing to do\n`);
    await push(reg, layouts.v1!, 'os/node:stable'); // back, for the other tests
  }, 60_000);

  it('two upgrades at once to a new digest: one stages it, the other finds it staged under the lock (not two deployments)', async () => {
    const b = await bootedOnStable();
    t = b.t;
    await push(reg, layouts.v2!, 'os/node:stable');
    try {
      const s = await Sysroot.open(t.dir, { waitSeconds: 60 });
      const pull = { authfile: auth, certsDir: reg.certsDir, blobDir: b.blobDir };
      const both = await Promise.all([s.upgrade({ pull }), s.upgrade({ pull })]);
      const staged = both.filter((r) => !r.alreadyStaged);
      expect(staged).toHaveLength(1);
      expect(both.filter((r) => r.alreadyStaged)).toMatchObject([{ id: staged[0]!.id, delta: [] }]);
      const st = t.sysroot.status();
      expect(st.staged).toBe(staged[0]!.id);
      expect(st.deployments.filter((d) => d.origin?.digest === digests.v2).map((d) => d.id)).toEqual([staged[0]!.id]);
    } finally {
      await push(reg, layouts.v1!, 'os/node:stable'); // back, for the other tests
    }
  }, 60_000);

  it('a booted deployment not pulled from a registry tracks nothing: a usage error that says what to do', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const r = await cli(['upgrade', '--sysroot', t.dir, '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.out).error).toMatchObject({ code: 'USAGE' });
    expect(r.err).toContain(`tracks no image in a registry (it runs no image): nothing to upgrade; \`stagedroot switch REF\` tracks one`);
    await expect(t.sysroot.checkUpgrade()).rejects.toMatchObject({ code: 'USAGE' });
  });
});

describe('stagedroot switch', () => {
  it('tracks a new reference (a bare pullspec too): staged from it, and upgrade follows it before and after the reboot', async () => {
    const b = await bootedOnStable();
    t = b.t;
    const check = await cli(['switch', `${reg.host}/os/other:edge`, '--check', ...b.args]);
    expect(check.code, check.err).toBe(0);
    expect(check.out).toContain(`image ${reg.host}/os/other:edge from https://${reg.host}\ndigest ${digests.other}, version 9\nan update: deployment ${t.sysroot.status().booted} runs another image\n`);
    const sw = await cli(['switch', `${reg.host}/os/other:edge`, ...b.args]);
    expect(sw.code, sw.err).toBe(0);
    const staged = t.sysroot.status().staged!;
    expect(sw.out).toMatch(new RegExp(`^staged deployment ${staged} \\(9\\) from ${reg.host.replace(/\./g, '\\.')}/os/other:edge: \\d+ paths changed`));
    // the upgrade after the switch follows the staged deployment's reference (the switch is kept)
    expect(await t.sysroot.checkUpgrade({ authfile: auth, certsDir: reg.certsDir, blobDir: b.blobDir })).toMatchObject({ pullspec: `${reg.host}/os/other:edge`, against: staged, upToDate: true });
    expect((await cli(['upgrade', ...b.args])).out).toContain('is staged with the image');
    await reboot(t.sysroot);
    const up = await cli(['upgrade', '--check', '--json', ...b.args]);
    expect(JSON.parse(up.out)).toMatchObject({ pullspec: `${reg.host}/os/other:edge`, digest: digests.other, upToDate: true, bytesNeeded: 0 });
  }, 60_000);

  it('--json prints the pull\'s progress as JSON lines on stderr, every layer\'s last one whole', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'blobs');
    const r = await cli(['switch', `docker://${reg.host}/os/other:edge`, '--json', '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir]);
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ ok: true, pullspec: `${reg.host}/os/other:edge` });
    const lines = r.err.trim().split('\n').map((l) => JSON.parse(l) as { progress: string; digest: string; what: string; size: number; fetched: number; cached: number });
    const layer = layerOf('other');
    const blobs = lines.filter((l) => l.progress === 'blob');
    expect(blobs.map((l) => l.what)).toEqual(['the config', 'layer 1 of 1']);
    expect(blobs[1]).toMatchObject({ digest: layer.digest, size: layer.size, fetched: layer.size, cached: 0 });
    // a line every MiB of the layer, its bytes growing, fetched now (nothing was there)
    const fetch = lines.filter((l) => l.progress === 'fetch') as unknown as { digest: string; bytes: number; size: number; fetched: number; cached: number }[];
    expect(fetch.length).toBe(Math.floor(layer.size / (1024 * 1024)));
    expect(fetch.every((l, i) => l.digest === layer.digest && l.size === layer.size && l.cached === 0 && l.fetched === l.bytes && l.bytes >= (i + 1) * 1024 * 1024 && (i === 0 || l.bytes > fetch[i - 1]!.bytes))).toBe(true);
  });

  it('stage docker://… --json prints the same lines', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const r = await cli(['stage', `docker://${reg.host}/os/other:edge`, '--json', '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', path.join(t.scratch, 'blobs')]);
    expect(r.code, r.err).toBe(0);
    const lines = r.err.trim().split('\n').map((l) => JSON.parse(l) as { progress: string; what: string });
    expect(lines.filter((l) => l.progress === 'blob').map((l) => l.what)).toEqual(['the config', 'layer 1 of 1']);
    expect(lines.filter((l) => l.progress === 'fetch').length).toBe(Math.floor(layerOf('other').size / (1024 * 1024)));
  });

  it('a bad reference is a usage error naming it', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const r = await cli(['switch', `${reg.host}/OS:1`, '--sysroot', t.dir]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`The image "${reg.host}/OS:1" is not a valid image reference: the repository name "OS" must be lowercase`);
  });
});
