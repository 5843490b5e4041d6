import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { header, writeZeroFileTarGz } from '../../../fixtures/tar-writer.mjs';

/**
 * Staging a 1 GiB layer keeps memory flat: a child process with a 64 MiB V8 heap
 * stages it, and its peak RSS (which also counts Buffers, outside the heap) stays far
 * below the layer's size. The archive is generated without holding it: a header, then
 * a sparse 1 GiB hole (zeros) and the end-of-archive blocks, by ftruncate. The .tar.gz
 * variant (256 MiB, gzip streamed chunk by chunk) checks the decompressing path too.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.join(here, '..', 'stage-big-layer.mjs');
const dist = path.join(here, '../../../dist/index.js');
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
/** Generous against the ~60-90 MiB a Node process with these modules needs; a layer held whole would be >= its size. */
const RSS_LIMIT_MIB = 200;

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-memory-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

async function stageInChild(layer: string, sysroot: string): Promise<Record<string, number | string>> {
  if (!fs.existsSync(dist)) throw new Error(`${dist} is missing: the memory test runs the built library (npm run build, or npm test)`);
  const r = await execa(process.execPath, ['--max-old-space-size=64', script, sysroot, layer], { reject: false, timeout: 170_000 });
  if (r.exitCode !== 0) throw new Error(`the child failed (exit ${r.exitCode}):\n${r.stderr}\n${r.stdout}`);
  const m = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, number | string>;
  console.log(`staged ${path.basename(layer)} in a --max-old-space-size=64 child: ${JSON.stringify(m)}`);
  return m;
}

it('stages a 1 GiB layer in a process with a 64 MiB heap, memory flat', async () => {
  const size = GiB;
  const layer = path.join(dir, 'big.tar');
  const fd = fs.openSync(layer, 'w');
  fs.writeSync(fd, header({ name: 'srv/big.img', size, mode: 0o644 }));
  fs.ftruncateSync(fd, 512 + size + 1024); // the hole reads as zeros: the body, then two zero blocks
  fs.closeSync(fd);
  const m = await stageInChild(layer, path.join(dir, 'sysroot'));
  expect(m.bytes).toBe(size);
  expect(fs.statSync(path.join(String(m.path), 'srv/big.img')).size).toBe(size);
  expect(Number(m.maxRssMiB)).toBeLessThan(RSS_LIMIT_MIB);
  fs.rmSync(path.join(dir, 'sysroot'), { recursive: true, force: true });
}, 180_000);

it('stages a 256 MiB .tar.gz layer the same way', async () => {
  const size = 256 * MiB;
  const layer = path.join(dir, 'big.tar.gz');
  await writeZeroFileTarGz(layer, 'srv/big.img', size);
  const m = await stageInChild(layer, path.join(dir, 'sysroot-gz'));
  expect(m.bytes).toBe(size);
  expect(Number(m.maxRssMiB)).toBeLessThan(RSS_LIMIT_MIB);
}, 180_000);
