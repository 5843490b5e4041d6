import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { header } from '../../../fixtures/tar-writer.mjs';
import { hostPlatform } from '../../../src/sources/oci/platform.js';

/**
 * Staging a 1 GiB OCI image keeps memory flat, as for tar layers: a child with a 64 MiB
 * V8 heap stages an image layout whose first layer is an uncompressed 1 GiB tar (a sparse
 * file, never held) and whose second layer whites part of it out. Every blob is hashed
 * while it streams, so the whole gigabyte is read (twice: checked, then applied).
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.join(here, '..', 'stage-big-layer.mjs');
const dist = path.join(here, '../../../dist/index.js');
const GiB = 1024 ** 3;
/** The big file's size; STAGEDROOT_IMAGE_GIB=4 measures a bigger image (the figures are printed). */
const SIZE = Number(process.env.STAGEDROOT_IMAGE_GIB ?? 1) * GiB;
const RSS_LIMIT_MIB = 200;

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-image-memory-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

async function sha256File(p: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of fs.createReadStream(p, { highWaterMark: 1 << 20 })) h.update(c as Buffer);
  return h.digest('hex');
}

/** Writes a blob into the layout and returns its descriptor. */
async function putBlob(layout: string, file: string, mediaType: string) {
  const hex = await sha256File(file);
  fs.renameSync(file, path.join(layout, 'blobs/sha256', hex));
  return { mediaType, digest: `sha256:${hex}`, size: fs.statSync(path.join(layout, 'blobs/sha256', hex)).size };
}

it(`stages a ${SIZE / GiB} GiB two-layer image in a process with a 64 MiB heap, memory flat`, async () => {
  if (!fs.existsSync(dist)) throw new Error(`${dist} is missing: the memory test runs the built library (npm run build, or npm test)`);
  const layout = path.join(dir, 'image');
  fs.mkdirSync(path.join(layout, 'blobs/sha256'), { recursive: true });
  fs.writeFileSync(path.join(layout, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');

  const l1 = path.join(dir, 'l1.tar');
  const fd = fs.openSync(l1, 'w');
  fs.writeSync(fd, Buffer.concat([header({ name: 'etc/os-release', size: 8, mode: 0o644 }), Buffer.from('ID=big\n\n'.padEnd(512, '\0'))]));
  fs.writeSync(fd, header({ name: 'srv/big.img', size: SIZE, mode: 0o644 }), 0, 512, 1024);
  fs.ftruncateSync(fd, 1536 + SIZE + 1024);
  fs.closeSync(fd);
  const l2 = path.join(dir, 'l2.tar');
  fs.writeFileSync(l2, Buffer.concat([header({ name: 'etc/.wh.os-release', size: 0, mode: 0o644 }), header({ name: 'etc/os-release', size: 4, mode: 0o644 }), Buffer.from('ID=2'.padEnd(512, '\0')), Buffer.alloc(1024)]));
  const layers = [await putBlob(layout, l1, 'application/vnd.oci.image.layer.v1.tar'), await putBlob(layout, l2, 'application/vnd.oci.image.layer.v1.tar')];
  const cfgFile = path.join(dir, 'config.json');
  fs.writeFileSync(cfgFile, JSON.stringify({ os: 'linux', architecture: hostPlatform().architecture, config: { Labels: { 'org.opencontainers.image.version': 'big-1' } }, rootfs: { type: 'layers', diff_ids: [layers[0]!.digest, layers[1]!.digest] } }));
  const config = await putBlob(layout, cfgFile, 'application/vnd.oci.image.config.v1+json');
  const mFile = path.join(dir, 'manifest.json');
  fs.writeFileSync(mFile, JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config, layers }));
  const manifest = await putBlob(layout, mFile, 'application/vnd.oci.image.manifest.v1+json');
  fs.writeFileSync(path.join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [manifest] }));

  const r = await execa(process.execPath, ['--max-old-space-size=64', script, path.join(dir, 'sysroot'), layout], { reject: false, timeout: 280_000 * Math.max(1, SIZE / GiB) });
  if (r.exitCode !== 0) throw new Error(`the child failed (exit ${r.exitCode}):\n${r.stderr}\n${r.stdout}`);
  const m = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, number | string>;
  console.log(`staged a ${(fs.statSync(path.join(layout, 'blobs/sha256', layers[0]!.digest.slice(7))).size / GiB).toFixed(2)} GiB image in a --max-old-space-size=64 child: ${JSON.stringify(m)}`);
  expect(fs.statSync(path.join(String(m.path), 'srv/big.img')).size).toBe(SIZE);
  expect(fs.readFileSync(path.join(String(m.path), 'etc/os-release'), 'utf8')).toBe('ID=2');
  expect(Number(m.maxRssMiB)).toBeLessThan(RSS_LIMIT_MIB);
}, 300_000 * Math.max(1, SIZE / GiB));
