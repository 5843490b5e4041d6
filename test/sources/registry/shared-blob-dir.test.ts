/**
 * One blob directory shared by pulls that run at once (two stages with the same
 * --blob-dir): each blob is written by one of them under its lock, the other finds it
 * whole, and index.json ends naming every image pulled, none overwriting another's entry.
 * Against the real docker-registry 2.8 (plain http on loopback), images built with umoci.
 */
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { pullImage } from '../../../src/sources/registry/pull.js';
import { parseDockerReference } from '../../../src/sources/registry/reference.js';
import { directoryStore } from '../../../src/sources/oci/blob-store.js';
import { resolveOci } from '../../../src/sources/oci/resolve.js';
import { blob, manifestOf, readIndex, sha256, umociImage, writeFiles } from '../oci/oci-helpers.js';
import { push, withRegistryScratch, type TestRegistry } from './registry-helpers.js';

const CHILD = path.join(import.meta.dirname, 'pull-child.mjs');
const scratch = withRegistryScratch('stagedroot-shared-blobs-');
let reg: TestRegistry;
let layout: string;
let one: { digest: string; json: { config: { digest: string }; layers: { digest: string; size: number }[] } };
let two: typeof one;

beforeAll(async () => {
  expect(fs.existsSync(path.join(import.meta.dirname, '../../../dist/sources/registry/pull.js')), 'needs the build (npm run build)').toBe(true);
  reg = await scratch.startRegistry('registry', { tls: false });
  layout = path.join(scratch.dir, 'layout');
  // Image 1: a large base layer (random, so that gzip keeps it large) and a small one;
  // image 2: image 1's layers and one more. Both share the base.
  await umociImage(scratch.dir, layout, '1', [{ add: { 'usr/share/base': randomBytes(6 * 1024 * 1024).toString('base64') } }, { add: { 'etc/os-release': 'ID=image\nVERSION_ID=1\n' } }]);
  await execa('umoci', ['tag', '--image', `${layout}:1`, '2']);
  await execa('umoci', ['insert', '--image', `${layout}:2`, writeFiles(path.join(scratch.dir, 'layer-two'), { 'etc/two': 'two\n' }), '/']);
  await push(reg, layout, 'os/shared:1');
  await push(reg, layout, 'os/shared:2');
  const byTag = (tag: string) => readIndex(layout).manifests.findIndex((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag);
  one = manifestOf(layout, byTag('1'));
  two = manifestOf(layout, byTag('2'));
  expect(two.json.layers[0]!.digest).toBe(one.json.layers[0]!.digest);
}, 120_000);

/** The directory holds each image whole, read back by digest; nothing half-written or locked is left. */
async function expectWhole(dir: string, images: (typeof one)[]): Promise<void> {
  expect(new Set(readIndex(dir).manifests.map((m) => m.digest))).toEqual(new Set(images.map((i) => i.digest)));
  for (const i of images) {
    const img = await resolveOci(directoryStore(dir), { digest: i.digest });
    expect(img.digest).toBe(i.digest);
    for (const l of [i.json.config, ...i.json.layers]) expect(sha256(fs.readFileSync(blob(dir, l.digest))), l.digest).toBe(l.digest.slice(7));
  }
  expect(fs.readdirSync(path.join(dir, 'blobs', 'sha256')).filter((n) => !/^[0-9a-f]{64}$/.test(n))).toEqual([]);
  expect(fs.readdirSync(dir).sort()).toEqual(['blobs', 'index.json', 'oci-layout']);
}

it('two processes pulling two images that share a layer into one directory at once: both whole, both named by index.json', async () => {
  const dir = path.join(scratch.dir, 'two-processes');
  const run = (tag: string) => execa(process.execPath, [CHILD, `${reg.host}/os/shared:${tag}`, dir], { reject: false });
  const [a, b] = await Promise.all([run('1'), run('2')]);
  expect(a.exitCode, a.stderr).toBe(0);
  expect(b.exitCode, b.stderr).toBe(0);
  expect(JSON.parse(a.stdout).digest).toBe(one.digest);
  expect(JSON.parse(b.stdout).digest).toBe(two.digest);
  await expectWhole(dir, [one, two]);
}, 60_000);

it('the same image pulled twice at once in one process: its blobs fetched once, each pull finds it whole', async () => {
  const dir = path.join(scratch.dir, 'one-process');
  const pull = () => pullImage(parseDockerReference(`docker://${reg.host}/os/shared:2`), dir, { plainHttp: true, auth: null, backoffMs: 5, registriesConf: null, policy: null });
  const [a, b] = await Promise.all([pull(), pull()]);
  expect(a.digest).toBe(two.digest);
  expect(b.digest).toBe(two.digest);
  const layers = two.json.layers.reduce((n, l) => n + l.size, 0);
  const config = fs.statSync(blob(layout, two.json.config.digest)).size;
  // every byte fetched by one of them only; what one fetched the other found in place
  expect(a.fetched + b.fetched).toBe(layers + config);
  expect(a.cached + b.cached).toBe(layers + config);
  await expectWhole(dir, [two]);
}, 60_000);

it('a later pull keeps the images the index already names, the newest first', async () => {
  const dir = path.join(scratch.dir, 'one-then-other');
  const pull = (tag: string) => pullImage(parseDockerReference(`docker://${reg.host}/os/shared:${tag}`), dir, { plainHttp: true, auth: null, backoffMs: 5, registriesConf: null, policy: null });
  await pull('1');
  await pull('2');
  expect(readIndex(dir).manifests.map((m) => m.digest)).toEqual([two.digest, one.digest]);
  await pull('1');
  expect(readIndex(dir).manifests.map((m) => m.digest)).toEqual([one.digest, two.digest]);
  await expectWhole(dir, [one, two]);
}, 60_000);
