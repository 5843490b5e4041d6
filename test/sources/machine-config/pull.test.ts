/* eslint-disable @typescript-eslint/no-explicit-any -- MachineConfig documents are edited here as plain JSON */
/**
 * A MachineConfig's spec.osImageURL (a bare pullspec, as MachineConfigs write it) pulled
 * from a real registry (docker-registry 2.8 with TLS and htpasswd) with --pull, as the
 * MCD does: image and config staged as one deployment, the origin keeping the pullspec,
 * the digest and the registry that served it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { sourceFromPath } from '../../../src/sources/detect.js';
import { hostPlatform } from '../../../src/sources/oci/platform.js';
import { reboot, type TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { NODE_TREE, renderedDoc } from './machine-config-helpers.js';
import { manifestOf, umociImage } from '../oci/oci-helpers.js';
import { push, writeAuthFile, withRegistryScratch, type TestRegistry } from '../registry/registry-helpers.js';

const USER = { name: 'mcd', password: 'pull-secret-not-shown-7' };
const scratch = withRegistryScratch('stagedroot-mc-pull-');
let reg: TestRegistry;
let auth: string;
let digest: string;
let t: TempSysroot | null = null;

beforeAll(async () => {
  reg = await scratch.startRegistry('registry', { htpasswd: USER });
  const layout = path.join(scratch.dir, 'image');
  await umociImage(scratch.dir, layout, '9.6', [{ add: { 'etc/os-release': 'ID=rhcos\nVERSION_ID=9.6\n', 'etc/passwd': 'root:x:0:0:root:/root:/bin/bash\n', 'usr/lib/os-file': 'from the registry\n' } }], { arch: hostPlatform().architecture, labels: { 'org.opencontainers.image.version': '9.6' } });
  await push(reg, layout, 'openshift/os:9.6');
  digest = manifestOf(layout).digest;
  auth = writeAuthFile(path.join(scratch.dir, 'auth.json'), { [reg.host]: USER });
}, 120_000);

function mcFile(name: string, url: string): string {
  const doc: Record<string, any> = renderedDoc(1);
  doc.spec.osImageURL = url;
  const p = path.join(t!.scratch, `${name}.yaml`);
  fs.writeFileSync(p, stringify(doc));
  return p;
}

describe('a MachineConfig whose osImageURL is pulled (--pull)', () => {
  it('by digest: the image from the registry, the config over it, the origin with pullspec and registry; nothing said about a password', async () => {
    t = await scratch.tempSysroot({ tree: NODE_TREE });
    const blobDir = path.join(t.scratch, 'blobs');
    const url = `${reg.host}/openshift/os@${digest}`;
    const r = await cli(['stage', mcFile('by-digest', url), '--pull', '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir, '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out + r.err).not.toContain(USER.password);
    const out = JSON.parse(r.out) as { id: string; path: string; warnings: { code: string }[] };
    expect(out.warnings.map((w) => w.code)).not.toContain('OS_IMAGE_NOT_APPLIED');
    expect(fs.readFileSync(path.join(out.path, 'usr/lib/os-file'), 'utf8')).toBe('from the registry\n');
    expect(fs.readFileSync(path.join(out.path, 'etc/chrony.conf'), 'utf8')).toContain('pool 0.rhel.pool.ntp.org iburst'); // the config's
    expect(fs.existsSync(path.join(out.path, 'etc/group'))).toBe(false); // the booted tree's files are gone: the image is the whole tree
    const d = t.sysroot.status().deployments.find((x) => x.id === out.id)!;
    expect(d.origin).toMatchObject({ digest, pullspec: url, registry: `https://${reg.host}` });
    expect(d.kernelArguments).toEqual(['y=0', 'z=4', 'y=1', 'z=4']);
    expect(fs.existsSync(path.join(blobDir, 'index.json'))).toBe(true);
  });

  it('by tag, through the library; once booted, the same config again needs no layer fetched', async () => {
    t = await scratch.tempSysroot({ tree: NODE_TREE });
    const blobDir = path.join(t.scratch, 'blobs');
    const fetched: string[] = [];
    const p = mcFile('by-tag', `${reg.host}/openshift/os:9.6`);
    const opts = { pull: true, authfile: auth, certsDir: reg.certsDir, blobDir, onBlob: (e: { what: string; fetched: number }) => e.fetched > 0 && fetched.push(e.what) };
    const s = await t.sysroot.stage(sourceFromPath(p, opts));
    expect(t.sysroot.status().deployments.find((x) => x.id === s.id)!.origin).toMatchObject({ digest, pullspec: `${reg.host}/openshift/os:9.6` });
    expect(fetched).toEqual(['the config', 'layer 1 of 1']);
    await reboot(t.sysroot);
    fetched.length = 0;
    const again = await t.sysroot.stage(sourceFromPath(p, opts));
    expect(again.alreadyRunning).toBeUndefined(); // a config over the image is still staged
    expect(fs.readFileSync(path.join(again.path, 'usr/lib/os-file'), 'utf8')).toBe('from the registry\n');
    expect(fetched).toEqual([]);
    // its image came with the config: upgrade would stage the image alone, and says so instead
    await reboot(t.sysroot);
    const up = await cli(['upgrade', '--sysroot', t.dir, '--authfile', auth, '--certs-dir', reg.certsDir, '--blob-dir', blobDir]);
    expect(up.code, up.err).toBe(2);
    expect(up.err).toContain(`is the image the MachineConfig ${renderedDoc(1).metadata.name} names with that config over it: an upgrade would stage the image without the config`);
    expect(t.sysroot.status().staged).toBeNull();
  });

  it('without --pull (and no store) nothing is pulled: the config goes over the booted tree, with OS_IMAGE_NOT_APPLIED', async () => {
    t = await scratch.tempSysroot({ tree: NODE_TREE });
    const r = await cli(['stage', mcFile('no-pull', `${reg.host}/openshift/os@${digest}`), '--sysroot', t.dir, '--json']);
    expect(r.code, r.out + r.err).toBe(0);
    const out = JSON.parse(r.out) as { path: string; warnings: { code: string; message: string }[] };
    expect(out.warnings).toContainEqual(expect.objectContaining({ code: 'OS_IMAGE_NOT_APPLIED', message: expect.stringContaining('it was not pulled (--pull)') }));
    expect(fs.existsSync(path.join(out.path, 'usr/lib/os-file'))).toBe(false);
  });

  it('a bad osImageURL is the config\'s error (SPEC_INVALID, exit 3); --pull with --image-store or on another source is a usage error', async () => {
    t = await scratch.tempSysroot({ tree: NODE_TREE });
    const bad = await cli(['stage', mcFile('bad', `docker://${reg.host}/openshift/os:9.6`), '--pull', '--sysroot', t.dir, '--json']);
    expect(bad.code, bad.out + bad.err).toBe(3);
    expect(JSON.parse(bad.out).error).toMatchObject({ code: 'SPEC_INVALID', message: expect.stringContaining('spec.osImageURL "docker://') });
    expect(t.sysroot.status().staged).toBeNull();
    const both = await cli(['stage', mcFile('both', `${reg.host}/openshift/os:9.6`), '--pull', '--image-store', scratch.dir, '--sysroot', t.dir]);
    expect(both.code).toBe(2);
    expect(both.err).toContain('--pull and --image-store are two places for the image spec.osImageURL names: give one');
    const spec = path.join(t.scratch, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/x', contents: 'x' }] }));
    const other = await cli(['stage', spec, '--pull', '--sysroot', t.dir]);
    expect(other.code).toBe(2);
    expect(other.err).toContain('--pull applies to MachineConfig sources');
  });

  it('a registry that refuses the credentials: REGISTRY_FAILED (exit 1) naming the image, nothing staged', async () => {
    t = await scratch.tempSysroot({ tree: NODE_TREE });
    const wrong = writeAuthFile(path.join(t.scratch, 'wrong.json'), { [reg.host]: { name: USER.name, password: 'wrong' } });
    const r = await cli(['stage', mcFile('refused', `${reg.host}/openshift/os:9.6`), '--pull', '--authfile', wrong, '--certs-dir', reg.certsDir, '--blob-dir', path.join(t.scratch, 'b'), '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toContain(`REGISTRY_FAILED: ${reg.host}/openshift/os:9.6`);
    expect(r.err).toContain('401');
    expect(t.sysroot.status().staged).toBeNull();
  });
});
