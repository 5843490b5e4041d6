import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hostPlatform } from '../../../src/sources/oci/platform.js';
import { detectKind } from '../../../src/sources/detect.js';
import { reboot, tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { cli } from '../../helpers/cli.js';
import { blob, listing, manifestOf, readIndex, rewriteManifest, sha256, skopeo, umociImage, type Step } from './oci-helpers.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

const BOOTED = { 'etc/os-release': 'ID=booted\n', 'etc/booted-only': 'x\n', 'usr/bin/old': 'old\n' };

/** Three layers: a base, a whiteout of srv/old, an opaque opt/app with new content. */
const STEPS: Step[] = [
  { add: { 'etc/os-release': 'ID=image\nVERSION_ID=2\n', 'srv/old/a': 'a\n', 'srv/keep': 'keep\n', 'opt/app/x': 'x\n', 'opt/app/y': 'y\n', 'usr/bin/tool': 'tool\n' } },
  { whiteout: '/srv/old' },
  { add: { z: 'z\n' }, at: '/opt/app', opaque: true },
];
const EXPECTED = {
  'etc/': '',
  'etc/os-release': 'ID=image\nVERSION_ID=2\n',
  'opt/': '',
  'opt/app/': '',
  'opt/app/z': 'z\n',
  'srv/': '',
  'srv/keep': 'keep\n',
  'usr/': '',
  'usr/bin/': '',
  'usr/bin/tool': 'tool\n',
  'var/': '', // the shared /var's mount point, empty
};

const status = async (dir: string) => JSON.parse((await cli(['status', '--json', '--sysroot', dir])).out);
const stagedOf = (st: { staged: string; deployments: { id: string }[] }) => st.deployments.find((d) => d.id === st.staged) as unknown as { path: string; label: string; origin: Record<string, unknown> };

async function image(s: TempSysroot, name = 'img', steps = STEPS, o: Parameters<typeof umociImage>[4] = { labels: { 'org.opencontainers.image.version': '2.0' } }): Promise<string> {
  const layout = path.join(s.scratch, name);
  await umociImage(s.scratch, layout, 'latest', steps, { arch: hostPlatform().architecture, ...o });
  return layout;
}

beforeAll(() => {
  // The tests stage host-architecture images; say so when the host is not one of them.
  expect(['amd64', 'arm64', '386', 'arm', 'ppc64le', 's390x', 'riscv64']).toContain(hostPlatform().architecture);
});

describe('OCI images built with umoci and skopeo', () => {
  it('an image layout directory is an image: its layers in order, whiteouts and opaque dirs across layers, a whole new root', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    expect(detectKind(layout)).toBe('image');
    const r = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
    const st = await status(t.dir);
    const d = stagedOf(st);
    expect(listing(d.path)).toEqual(EXPECTED);
    expect(d.label).toBe('2.0'); // org.opencontainers.image.version
    expect(d.origin).toMatchObject({ kind: 'oci-image', digest: manifestOf(layout).digest, ref: 'latest', labels: { 'org.opencontainers.image.version': '2.0' }, platform: `linux/${hostPlatform().architecture}` });
  });

  it('the same image as an oci-archive and as a docker-archive (skopeo) stages the same tree', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    const ociArchive = path.join(t.scratch, 'img.oci.tar');
    const dockerArchive = path.join(t.scratch, 'img.docker.tar');
    await skopeo(['copy', `oci:${layout}:latest`, `oci-archive:${ociArchive}`]);
    await skopeo(['copy', `oci:${layout}:latest`, `docker-archive:${dockerArchive}:example/os:2.0`]);
    for (const [file, extra] of [[ociArchive, []], [dockerArchive, ['--ref', 'example/os:2.0']], [dockerArchive, []]] as const) {
      const r = await cli(['stage', file, ...extra, '--sysroot', t.dir]);
      expect(r.code, `${file}: ${r.err}`).toBe(0);
      expect(listing(stagedOf(await status(t.dir)).path)).toEqual(EXPECTED);
    }
    const st = await status(t.dir);
    expect(stagedOf(st).origin.mediaType).toBe('application/vnd.docker.container.image.v1+json');
    const wrongTag = await cli(['stage', dockerArchive, '--ref', 'example/os:9', '--sysroot', t.dir]);
    expect(wrongTag.code).toBe(3);
    expect(wrongTag.err).toContain('example/os:2.0');
  });

  it('zstd and uncompressed layers', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    const zstd = path.join(t.scratch, 'zstd');
    await skopeo(['copy', '--dest-compress-format', 'zstd', `oci:${layout}:latest`, `oci:${zstd}:latest`]);
    expect(manifestOf(zstd).json.layers.map((l) => l.mediaType)).toContain('application/vnd.oci.image.layer.v1.tar+zstd');
    let r = await cli(['stage', zstd, '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
    expect(listing(stagedOf(await status(t.dir)).path)).toEqual(EXPECTED);

    // gunzip every layer and point the manifest at the plain tars
    rewriteManifest(layout, 0, (m) => {
      for (const l of m.layers as { digest: string; size: number; mediaType: string }[]) {
        const plain = zlib.gunzipSync(fs.readFileSync(blob(layout, l.digest)));
        l.digest = `sha256:${sha256(plain)}`;
        l.size = plain.length;
        l.mediaType = 'application/vnd.oci.image.layer.v1.tar';
        fs.writeFileSync(blob(layout, l.digest), plain);
      }
    });
    r = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
    expect(listing(stagedOf(await status(t.dir)).path)).toEqual(EXPECTED);
  });

  it('a multi-arch image: the host platform by default, --platform, --ref; the index platform when it has one', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = path.join(t.scratch, 'multi');
    const host = hostPlatform().architecture;
    const other = host === 'arm64' ? 'amd64' : 'arm64';
    await umociImage(t.scratch, layout, 'other', [{ add: { 'etc/os-release': `ID=${other}\n` } }], { arch: other });
    await umociImage(t.scratch, layout, 'host', [{ add: { 'etc/os-release': `ID=${host}\n` } }], { arch: host });
    const osRelease = async () => fs.readFileSync(path.join(stagedOf(await status(t!.dir)).path, 'etc/os-release'), 'utf8');

    expect((await cli(['stage', layout, '--sysroot', t.dir])).code).toBe(0);
    expect(await osRelease()).toBe(`ID=${host}\n`);
    expect((await cli(['stage', layout, '--platform', `linux/${other}`, '--sysroot', t.dir])).code).toBe(0);
    expect(await osRelease()).toBe(`ID=${other}\n`);
    const named = await cli(['stage', layout, '--ref', 'other', '--platform', `linux/${other}`, '--sysroot', t.dir]);
    expect(named.code, named.err).toBe(0);
    expect((await status(t.dir)).deployments.find((d: { id: string }) => d.id === (named.out.match(/deployment (\d+)/)?.[1])).origin.ref).toBe('other');

    // --ref naming the other architecture's manifest, on this host: not for this platform
    const wrong = await cli(['stage', layout, '--ref', 'other', '--sysroot', t.dir]);
    expect(wrong.code).toBe(3);
    expect(wrong.err).toContain(`linux/${other}`);
    expect(wrong.err).toContain(readIndex(layout).manifests[0]!.digest);

    // An index with platforms (as registries write them): chosen without reading the other manifest
    const index = readIndex(layout);
    index.manifests[0]!.platform = { os: 'linux', architecture: other };
    index.manifests[1]!.platform = { os: 'linux', architecture: host };
    fs.rmSync(blob(layout, index.manifests[0]!.digest)); // never read
    fs.writeFileSync(path.join(layout, 'index.json'), JSON.stringify(index));
    expect((await cli(['stage', layout, '--sysroot', t.dir])).code).toBe(0);
    expect(await osRelease()).toBe(`ID=${host}\n`);
    expect((await cli(['stage', layout, '--platform', 'linux/riscv64', '--sysroot', t.dir])).code).toBe(3);
    expect((await cli(['stage', layout, '--platform', 'nonsense', '--sysroot', t.dir])).code).toBe(2);
    // --platform and --ref mean nothing to other sources: a usage error
    const spec = path.join(t.scratch, 'u.json');
    fs.writeFileSync(spec, JSON.stringify({ version: 1, files: [{ path: '/etc/x', contents: 'x' }] }));
    expect((await cli(['stage', spec, '--ref', 'host', '--sysroot', t.dir])).code).toBe(2);
  });

  it("an image's var/ is initial content for the shared /var: added where the machine lacks it, never over its state", async () => {
    t = await tempSysroot({ tree: { ...BOOTED, 'var/lib/db/data': 'machine state\n' } });
    const layout = await image(t, 'img', [{ add: { 'etc/os-release': 'ID=image\n', 'var/lib/db/data': 'image default\n', 'var/lib/new/seed': 'seed\n' } }]);
    const r = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(r.code, r.err).toBe(0);
    const st = await status(t.dir);
    const varDir = st.shared.var as string;
    expect(fs.readFileSync(path.join(varDir, 'lib/db/data'), 'utf8')).toBe('machine state\n'); // stage never writes /var
    expect(fs.existsSync(path.join(varDir, 'lib/new/seed'))).toBe(false);
    await reboot(t.sysroot);
    expect(fs.readFileSync(path.join(varDir, 'lib/db/data'), 'utf8')).toBe('machine state\n');
    expect(fs.readFileSync(path.join(varDir, 'lib/new/seed'), 'utf8')).toBe('seed\n');
    expect(fs.readdirSync(path.join(stagedOf(st).path, 'var'))).toEqual([]); // the mount point only
  });

  it('the image the booted deployment already runs: says so, stages nothing, exit 0', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    expect((await cli(['stage', layout, '--sysroot', t.dir])).code).toBe(0);
    await reboot(t.sysroot);
    const before = await status(t.dir);
    const again = await cli(['stage', layout, '--sysroot', t.dir]);
    expect(again.code).toBe(0);
    expect(again.out).toContain('already runs this image');
    const after = await status(t.dir);
    expect(after.staged).toBeNull();
    expect(after.deployments).toEqual(before.deployments);
  });
});

describe('broken images are rejected before anything is staged (exit 3, the blob named)', () => {
  async function rejected(s: TempSysroot, src: string, ...needles: string[]): Promise<void> {
    const before = await status(s.dir);
    const r = await cli(['stage', src, '--sysroot', s.dir]);
    expect(r.code, r.err).toBe(3);
    for (const n of needles) expect(r.err).toContain(n);
    const after = await status(s.dir);
    expect(after.staged).toBeNull();
    expect(after.lastFailure.reason).toContain(needles[0]);
    // nothing but the failure record: no tree kept from a source rejected in its first pass
    expect(after.deployments.filter((d: { failed: boolean }) => !d.failed)).toEqual(before.deployments.filter((d: { failed: boolean }) => !d.failed));
  }
  const lastLayer = (layout: string) => manifestOf(layout).json.layers.at(-1)!.digest;

  it('a corrupted blob (same size, one byte changed)', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    const d = lastLayer(layout);
    const f = blob(layout, d);
    const b = fs.readFileSync(f);
    b[b.length - 3] = b[b.length - 3]! ^ 0xff;
    fs.writeFileSync(f, b);
    await rejected(t, layout, d);
  });

  it('a truncated blob, a missing blob, a corrupt config', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    const d = manifestOf(layout).json.layers[0]!.digest;
    const f = blob(layout, d);
    fs.truncateSync(f, Math.floor(fs.statSync(f).size / 2));
    await rejected(t, layout, d, 'truncated');
    fs.rmSync(f);
    await rejected(t, layout, d, 'missing');
  });

  it('a truncated layer blob whose descriptor says the same size (the truncated entry is the rejection)', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t, 'img', [{ add: { 'srv/big': 'x'.repeat(100_000) } }]);
    let digest = '';
    rewriteManifest(layout, 0, (m) => {
      const l = (m.layers as { digest: string; size: number; mediaType: string }[])[0]!;
      const plain = zlib.gunzipSync(fs.readFileSync(blob(layout, l.digest)));
      const cut = plain.subarray(0, 512 + 50_000); // the header and half the body
      digest = l.digest = `sha256:${sha256(cut)}`;
      l.size = cut.length;
      l.mediaType = 'application/vnd.oci.image.layer.v1.tar';
      fs.writeFileSync(blob(layout, l.digest), cut);
    });
    await rejected(t, layout, digest, 'truncated');
  });

  it('an unknown layer media type', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    const d = lastLayer(layout);
    rewriteManifest(layout, 0, (m) => {
      (m.layers as { mediaType: string }[]).at(-1)!.mediaType = 'application/vnd.example.squashfs';
    });
    await rejected(t, layout, d, 'application/vnd.example.squashfs');
  });

  it('a docker-archive whose layer does not match its diff id', async () => {
    t = await tempSysroot({ tree: BOOTED });
    const layout = await image(t);
    const archive = path.join(t.scratch, 'd.tar');
    await skopeo(['copy', `oci:${layout}:latest`, `docker-archive:${archive}:x/y:1`]);
    // flip one byte inside the first layer's file content (a layer named by its diff id)
    const data = fs.readFileSync(archive);
    const at = data.indexOf('ID=image');
    expect(at).toBeGreaterThan(0);
    data[at] = 'J'.charCodeAt(0);
    fs.writeFileSync(archive, data);
    await rejected(t, archive, 'does not match its digest');
  });
});
