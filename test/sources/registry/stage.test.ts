/**
 * Staging an image from a real registry (docker-registry 2.8 with TLS and htpasswd):
 * pulled into a blob directory, read as an OCI layout, recorded by digest with the
 * pullspec and the registry that served it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { findAuthFile } from '../../../src/sources/registry/auth-file.js';
import { pullImage } from '../../../src/sources/registry/pull.js';
import { parseDockerReference } from '../../../src/sources/registry/reference.js';
import { registrySource } from '../../../src/sources/registry/source.js';
import { sourceFromPath } from '../../../src/sources/detect.js';
import { hostPlatform } from '../../../src/sources/oci/platform.js';
import { reboot, type TempSysroot } from '../../../src/testing/index.js';
import { Sysroot } from '../../../src/sysroot.js';
import { cli } from '../../helpers/cli.js';
import { listing, manifestOf, umociImage } from '../oci/oci-helpers.js';
import { push, writeAuthFile, withRegistryScratch, type TestRegistry } from './registry-helpers.js';

const USER = { name: 'stager', password: 'not-in-any-message-9' };
const scratch = withRegistryScratch('stagedroot-registry-stage-');
let reg: TestRegistry;
let auth: string;
let digest1: string;
let digest2: string;

beforeAll(async () => {
  reg = await scratch.startRegistry('registry', { htpasswd: USER });
  const arch = hostPlatform().architecture;
  const v1 = path.join(scratch.dir, 'v1');
  await umociImage(scratch.dir, v1, '1', [{ add: { 'etc/os-release': 'ID=image\nVERSION_ID=1\n', 'usr/bin/tool': 'one\n' } }], { arch, labels: { 'org.opencontainers.image.version': '1.0' } });
  await push(reg, v1, 'os/node:1');
  digest1 = manifestOf(v1).digest;
  const v2 = path.join(scratch.dir, 'v2');
  await umociImage(scratch.dir, v2, '2', [{ add: { 'etc/os-release': 'ID=image\nVERSION_ID=2\n', 'usr/bin/tool': 'two\n' } }], { arch, labels: { 'org.opencontainers.image.version': '2.0' } });
  await push(reg, v2, 'os/node:2');
  digest2 = manifestOf(v2).digest;
  auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), { [reg.host]: USER });
}, 120_000);
let t: TempSysroot | null = null;

let fetched = 0;
const source = (s: string, blobDir: string) => registrySource(parseDockerReference(`docker://${reg.host}/${s}`), { blobDir, certsDir: reg.certsDir, authfile: auth, backoffMs: 10, onBlob: (e) => (fetched += e.fetched) });

describe('stage docker://… (library)', () => {
  it('stages an image from the registry; status keeps the pullspec, the digest and the registry', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'blobs');
    const r = await t.sysroot.stage(source('os/node:1', blobDir));
    expect(r.alreadyRunning).toBeFalsy();
    const st = t.sysroot.status();
    const d = st.deployments.find((x) => x.id === st.staged)!;
    expect(d.label).toBe('1.0');
    expect(d.origin).toEqual({
      kind: 'oci-image',
      digest: digest1,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      labels: { 'org.opencontainers.image.version': '1.0' },
      ref: '1',
      platform: `linux/${hostPlatform().architecture}`,
      pullspec: `${reg.host}/os/node:1`,
      registry: `https://${reg.host}`,
      // The paths of the pull's options, which a later upgrade gives again (never what the files hold).
      pulledWith: { authfile: auth, certsDir: reg.certsDir, blobDir },
      // Its one layer, by diff_id, as the layer store keeps it.
      layers: [expect.stringMatching(/^sha256:[0-9a-f]{64}$/)],
    });
    expect(d.source).toBe(`image ${reg.host}/os/node:1 (${digest1}) pulled from https://${reg.host} with the credentials for ${reg.host} in ${auth}: image ${blobDir} (${digest1}, linux/${hostPlatform().architecture}): 1 layer`);
    expect(JSON.stringify(st)).not.toContain(USER.password);
    expect(listing((d as unknown as { path: string }).path)).toMatchObject({ 'etc/os-release': 'ID=image\nVERSION_ID=1\n', 'usr/bin/tool': 'one\n' });
  });

  it('the same image again once booted: nothing staged and nothing fetched again; the next tag: staged', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'blobs');
    fetched = 0;
    await t.sysroot.stage(source('os/node:1', blobDir));
    expect(fetched).toBeGreaterThan(0);
    await reboot(t.sysroot);
    fetched = 0;
    expect((await t.sysroot.stage(source('os/node:1', blobDir))).alreadyRunning).toBe(true);
    expect((await t.sysroot.stage(source(`os/node@${digest1}`, blobDir))).alreadyRunning).toBe(true);
    expect(fetched).toBe(0);
    // with an empty blob directory, only the manifest and config are fetched to know it is the same image
    const seen: string[] = [];
    const fresh = registrySource(parseDockerReference(`docker://${reg.host}/os/node:1`), { blobDir: path.join(t.scratch, 'empty-blobs'), certsDir: reg.certsDir, authfile: auth, onBlob: (e) => seen.push(e.what) });
    expect((await t.sysroot.stage(fresh)).alreadyRunning).toBe(true);
    expect(seen).toEqual(['the config']);
    const r = await t.sysroot.stage(source('os/node:2', blobDir));
    expect(r.alreadyRunning).toBeFalsy();
    expect(fetched).toBeGreaterThan(0);
    const st = t.sysroot.status();
    expect(st.deployments.find((x) => x.id === st.staged)!.origin).toMatchObject({ digest: digest2, pullspec: `${reg.host}/os/node:2` });
  });

  it('init from a registry image: the first deployment is the image, its origin recorded', async () => {
    const base = fs.mkdtempSync(path.join(scratch.dir, 'init-'));
    const s = await Sysroot.init(path.join(base, 'sysroot'), { source: source('os/node:2', path.join(base, 'blobs')) });
    const st = s.status();
    const d = st.deployments.find((x) => x.id === st.current)!;
    expect(d.origin).toMatchObject({ digest: digest2, pullspec: `${reg.host}/os/node:2`, registry: `https://${reg.host}` });
    expect(listing((d as unknown as { path: string }).path)).toMatchObject({ 'usr/bin/tool': 'two\n' });
  });

  it('a layer blob corrupted on the disk after its pull: SOURCE_CORRUPT, the blob removed, the next stage fetches it again', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'blobs');
    await pullImage(parseDockerReference(`docker://${reg.host}/os/node:1`), blobDir, { auth: await findAuthFile({ authfile: auth }), certsDir: reg.certsDir });
    const layer = manifestOf(path.join(scratch.dir, 'v1')).json.layers[0]!;
    const file = path.join(blobDir, 'blobs', ...layer.digest.split(':'));
    const bytes = fs.readFileSync(file);
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff;
    fs.writeFileSync(file, bytes);
    fetched = 0;
    const err = (await t.sysroot.stage(source('os/node:1', blobDir)).catch((e: unknown) => e)) as StagedrootError;
    expect(err.code).toBe('SOURCE_CORRUPT');
    expect(err.message).toContain(layer.digest);
    expect(err.digest).toBe(layer.digest);
    expect(err.message).toContain(`(removed from ${blobDir}: the next pull fetches it again)`);
    expect(fetched).toBe(0);
    expect(fs.existsSync(file)).toBe(false);
    expect(t.sysroot.status().staged).toBeNull();
    await t.sysroot.stage(source('os/node:1', blobDir));
    expect(fetched).toBe(layer.size);
    expect(t.sysroot.status().staged).not.toBeNull();
  });

  it('sourceFromPath takes docker://… as a registry image', async () => {
    const s = sourceFromPath(`docker://${reg.host}/os/node:1`);
    expect(s.kind).toBe('image');
    expect(s.describe).toBe(`image ${reg.host}/os/node:1`);
    expect(() => sourceFromPath('docker:/bad')).toThrow(/does not start with docker:\/\//);
  });

  it('a registry that fails: REGISTRY_FAILED recorded as the stage\'s failure, nothing staged', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const missing = await findAuthFile({ candidates: [] });
    const s = registrySource(parseDockerReference(`docker://${reg.host}/os/node:1`), { blobDir: path.join(t.scratch, 'blobs'), certsDir: reg.certsDir, auth: missing });
    await expect(t.sysroot.stage(s)).rejects.toMatchObject({ code: 'REGISTRY_FAILED' });
    const st = t.sysroot.status();
    expect(st.staged).toBeNull();
    expect(st.lastFailure).toMatchObject({ code: 'REGISTRY_FAILED', reason: expect.stringContaining(`${reg.host}/os/node:1`) });
  });
});

describe('stagedroot stage docker://… (CLI)', () => {
  it('pulls with --authfile, --certs-dir and --blob-dir and stages; status --json shows the origin', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'cli-blobs');
    const r = await cli(['stage', `docker://${reg.host}/os/node:2`, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^staged deployment \d+ \(2\.0\)/);
    expect(r.out + r.err).not.toContain(USER.password);
    const st = JSON.parse((await cli(['status', '--json', '--sysroot', t.dir])).out) as { staged: string; deployments: { id: string; origin?: Record<string, unknown> }[] };
    expect(st.deployments.find((d) => d.id === st.staged)!.origin).toMatchObject({ digest: digest2, pullspec: `${reg.host}/os/node:2`, registry: `https://${reg.host}` });
    expect(fs.existsSync(path.join(blobDir, 'index.json'))).toBe(true);
  });

  it('--check fetches only the manifest and config and says what a pull would fetch, before and after the stage', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const blobDir = path.join(t.scratch, 'check-blobs');
    const args = [`docker://${reg.host}/os/node:1`, '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir];
    const layer = manifestOf(path.join(scratch.dir, 'v1')).json.layers[0]!;
    const before = await cli(['stage', ...args, '--check']);
    expect(before.code, before.err).toBe(0);
    expect(before.out).toBe(
      [
        `image ${reg.host}/os/node:1 from https://${reg.host}`,
        `digest ${digest1}, version 1.0`,
        'an update: the booted deployment runs another image',
        `layers: 0 of 1 present (0 bytes), 1 to fetch (${layer.size} bytes)`,
        `  to fetch ${layer.digest} ${layer.size} bytes`,
        '',
      ].join('\n'),
    );
    expect(fs.existsSync(path.join(blobDir, 'blobs', ...layer.digest.split(':')))).toBe(false);
    expect(t.sysroot.status().staged).toBeNull();
    expect((await cli(['stage', ...args])).code).toBe(0);
    await reboot(t.sysroot);
    const after = await cli(['stage', ...args, '--check', '--json']);
    expect(after.code, after.err).toBe(0);
    expect(JSON.parse(after.out)).toEqual({
      ok: true,
      pullspec: `${reg.host}/os/node:1`,
      digest: digest1,
      registry: `https://${reg.host}`,
      version: '1.0',
      layers: [{ digest: layer.digest, size: layer.size, present: true, partial: 0 }],
      bytesPresent: layer.size,
      bytesNeeded: 0,
      credentials: `the credentials for ${reg.host} in ${auth}`,
      upToDate: true,
    });
    const notRegistry = await cli(['stage', path.join(scratch.dir, 'v1'), '--sysroot', t.dir, '--check']);
    expect(notRegistry.code).toBe(2);
    expect(notRegistry.err).toContain('--check applies to an image in a registry (docker://…)');
  });

  it('a bad reference is a usage error naming it; registry options on a file source too', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const bad = await cli(['stage', `docker://${reg.host}/OS:1`, '--sysroot', t.dir]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain(`The source "docker://${reg.host}/OS:1" is not a valid image reference: the repository name "OS" must be lowercase`);
    const spec = path.join(t.scratch, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify({ version: 1, files: [{ path: '/etc/x', contents: 'x' }] }));
    const r = await cli(['stage', spec, '--sysroot', t.dir, '--authfile', auth]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--authfile, --certs-dir, --blob-dir, --registries-conf, --policy and --registries-d apply to images in a registry \(docker:\/\/…, or a MachineConfig's osImageURL with --pull\); .*spec\.json is a spec source/);
  });

  it('an unreachable registry: exit 1, REGISTRY_FAILED naming the image', async () => {
    t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
    const r = await cli(['stage', 'docker://127.0.0.1:1/os/node:1', '--sysroot', t.dir, '--blob-dir', path.join(t.scratch, 'b'), '--authfile', auth]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/REGISTRY_FAILED: 127\.0\.0\.1:1\/os\/node:1: the manifest \(tag 1\): 127\.0\.0\.1:1: ECONNREFUSED/);
  }, 60_000);
});
