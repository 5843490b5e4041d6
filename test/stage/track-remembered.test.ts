/**
 * `upgrade` remembers how the tracked deployment was pulled: the paths of --authfile,
 * --certs-dir, --blob-dir and --registries-conf it was staged with are kept in its origin
 * (never what the files hold) and given again when upgrade is not given them. Against a
 * real registry (docker-registry 2.8, TLS, htpasswd): without the remembered credentials
 * and CA the pull would be refused.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { hostPlatform } from '../../src/sources/oci/platform.js';
import { reboot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { manifestOf, umociImage } from '../sources/oci/oci-helpers.js';
import { push, writeAuthFile, withRegistryScratch, type TestRegistry } from '../sources/registry/registry-helpers.js';

const USER = { name: 'upgrader', password: 'remembered-never-printed-3' };
const scratch = withRegistryScratch('stagedroot-remembered-');
let reg: TestRegistry;
const layouts: Record<string, string> = {};
const digests: Record<string, string> = {};

async function image(name: string, version: string): Promise<void> {
  const dir = path.join(scratch.dir, name);
  await umociImage(scratch.dir, dir, 'stable', [{ add: { 'etc/os-release': `ID=image\nVERSION_ID=${version}\n`, [`usr/share/${name}`]: `${version}\n`.repeat(1000) } }], { arch: hostPlatform().architecture, labels: { 'org.opencontainers.image.version': version } });
  layouts[name] = dir;
  digests[name] = manifestOf(dir).digest;
}

beforeAll(async () => {
  reg = await scratch.startRegistry('registry', { htpasswd: USER });
  await Promise.all([image('v1', '1'), image('v2', '2'), image('v3', '3')]);
  await push(reg, layouts.v1!, 'os/node:stable');
}, 120_000);
let t: TempSysroot | null = null;

const originOf = async (id: string) => (JSON.parse((await cli(['status', '--sysroot', t!.dir, '--json'])).out) as { deployments: { id: string; origin?: { digest: string; pulledWith?: Record<string, string> } }[] }).deployments.find((d) => d.id === id)!.origin!;

it('upgrade after `stage docker://… --authfile F --certs-dir C --blob-dir B` pulls with F, C and B again; a remembered file gone is a usage error naming it', async () => {
  t = await scratch.tempSysroot({ tree: { 'etc/os-release': 'ID=booted\n' } });
  const auth = writeAuthFile(path.join(t.scratch, 'auth', 'auth.json'), { [reg.host]: USER });
  const blobDir = path.join(t.scratch, 'blobs');
  const conf = path.join(t.scratch, 'registries.conf');
  fs.writeFileSync(conf, `[[registry]]\nprefix = "${reg.host}/os"\nlocation = "${reg.host}/os"\n`);
  // relative paths are recorded absolute: a later upgrade may run from anywhere
  const rel = path.relative(process.cwd(), auth);
  const staged = await cli(['stage', `docker://${reg.host}/os/node:stable`, '--sysroot', t.dir, '--authfile', rel, '--certs-dir', reg.certsDir, '--blob-dir', blobDir, '--registries-conf', conf]);
  expect(staged.code, staged.err).toBe(0);
  await reboot(t.sysroot);
  const booted = t.sysroot.status().booted!;
  expect(await originOf(booted)).toMatchObject({ digest: digests.v1, pulledWith: { authfile: auth, certsDir: reg.certsDir, blobDir, registriesConf: conf } });

  // nothing given: the remembered credentials, CA, blob directory and registries.conf
  await push(reg, layouts.v2!, 'os/node:stable');
  const check = await cli(['upgrade', '--check', '--json', '--sysroot', t.dir]);
  expect(check.code, check.err).toBe(0);
  expect(JSON.parse(check.out)).toMatchObject({ digest: digests.v2, upToDate: false, credentials: `the credentials for ${reg.host} in ${auth}` });
  const up = await cli(['upgrade', '--sysroot', t.dir]);
  expect(up.code, up.err).toBe(0);
  const next = t.sysroot.status().staged!;
  expect(await originOf(next)).toMatchObject({ digest: digests.v2, pulledWith: { authfile: auth, certsDir: reg.certsDir, blobDir, registriesConf: conf } });
  expect(fs.existsSync(path.join(blobDir, 'blobs', ...manifestOf(layouts.v2!).json.layers[0]!.digest.split(':')))).toBe(true);
  expect(t.sysroot.status().deployments.find((d) => d.id === next)!.source).toContain(`with the credentials for ${reg.host} in ${auth}`);
  await reboot(t.sysroot);

  // the remembered authfile gone: a usage error naming it and the deployment, nothing fetched, no credential printed
  await push(reg, layouts.v3!, 'os/node:stable');
  const moved = path.join(t.scratch, 'auth-moved.json');
  fs.renameSync(auth, moved);
  const gone = await cli(['upgrade', '--sysroot', t.dir]);
  expect(gone.code).toBe(2);
  expect(gone.err).toContain(`The credentials file ${auth} that deployment ${next} (2) was pulled with (--authfile) does not exist: restore it, or give --authfile again`);
  expect(t.sysroot.status().staged).toBeNull();
  const goneJson = await cli(['upgrade', '--check', '--json', '--sysroot', t.dir]);
  expect(JSON.parse(goneJson.out).error).toMatchObject({ code: 'USAGE', path: auth });
  for (const r of [gone, goneJson]) expect(r.out + r.err).not.toContain(USER.password);

  // one given again wins and is remembered in its place
  const up3 = await cli(['upgrade', '--sysroot', t.dir, '--authfile', moved]);
  expect(up3.code, up3.err).toBe(0);
  expect(await originOf(t.sysroot.status().staged!)).toMatchObject({ digest: digests.v3, pulledWith: { authfile: moved, blobDir } });

  // a remembered registries.conf gone: the same
  fs.rmSync(conf);
  await reboot(t.sysroot);
  const noConf = await cli(['upgrade', '--check', '--sysroot', t.dir]);
  expect(noConf.code).toBe(2);
  expect(noConf.err).toContain(`The registries configuration ${conf} that deployment ${t.sysroot.status().booted} (3) was pulled with (--registries-conf) does not exist: restore it, or give --registries-conf again`);
}, 120_000);
