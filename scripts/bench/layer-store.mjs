/**
 * `node scripts/bench/layer-store.mjs [DIR] [FILES]`: the layer store's rows (issue 29), in
 * one run, each against its baseline, medians of 3 (not yet a row of `npm run bench`).
 * Under DIR (default /var/tmp: the root filesystem), a generated v1 image (one gzip layer:
 * FILES files, default 20,000, of 50–4,000 bytes in directories of 100 under usr/share) and
 * v2 = v1 plus two small layers (200 files each):
 * - first install: importLayer of v1's layer + linkLayers + `sync -f`, against `tar -xzf`
 *   of the layer + `sync -f`;
 * - the update: v2 with v1 in the store (its two new layers imported, the three linked),
 *   + `sync -f`, against `cp -al` of the v1 tree + `sync -f` + `tar -xzf` of the two new
 *   layers + `sync -f`.
 * Uses the compiled library (dist/: `npm run build` first).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { importLayer } from '../../dist/layer-store/import-layer.js';
import { linkLayers } from '../../dist/layer-store/link-tree.js';
import { LayerStore } from '../../dist/layer-store/store.js';
import { prng } from './prng.mjs';

const dir = fs.mkdtempSync(path.join(process.argv[2] ?? '/var/tmp', 'layer-store-bench-'));
const FILES = Number(process.argv[3] ?? 20_000);
const sh = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
const sync = () => sh('sync', ['-f', dir]);

function genTree(root, n, seed, prefix) {
  const rand = prng(seed).next;
  for (let i = 0; i < n; i++) {
    const d = path.join(root, prefix, `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(d, `f${i}`), Buffer.alloc(50 + Math.floor(rand() * 3950), i % 251));
  }
}
function layerOf(name, n, seed, prefix) {
  const src = path.join(dir, `src-${name}`);
  genTree(src, n, seed, prefix);
  const tgz = path.join(dir, `${name}.tar.gz`);
  sh('tar', ['--numeric-owner', '-czf', tgz, '-C', src, '.']);
  const data = fs.readFileSync(tgz);
  const diffId = `sha256:${createHash('sha256').update(execFileSync('gzip', ['-dc', tgz], { maxBuffer: 1 << 30 })).digest('hex')}`;
  return { file: tgz, digest: `sha256:${createHash('sha256').update(data).digest('hex')}`, diffId, size: data.length };
}
const blob = (l) => ({ ...l, where: l.file, async *open() { const fd = fs.openSync(l.file, 'r'); try { const b = Buffer.alloc(1 << 18); for (let n = fs.readSync(fd, b); n > 0; n = fs.readSync(fd, b)) yield Buffer.from(b.subarray(0, n)); } finally { fs.closeSync(fd); } } });
const time = async (f) => { const t = performance.now(); await f(); return performance.now() - t; };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rm = (p) => fs.rmSync(p, { recursive: true, force: true });

const v1 = layerOf('v1', FILES, 1, 'usr/share');
const a = layerOf('a', 200, 2, 'usr/share/a');
const b = layerOf('b', 200, 3, 'usr/lib/b');
const rows = { untar: [], install: [], baseline: [], update: [] };
for (let round = 0; round < 3; round++) {
  const r = path.join(dir, `r${round}`);
  fs.mkdirSync(r);
  rows.untar.push(await time(() => { fs.mkdirSync(`${r}/untar`); sh('tar', ['-xzf', v1.file, '-C', `${r}/untar`]); sync(); }));
  const store = new LayerStore(`${r}/layers`);
  rows.install.push(await time(async () => { await importLayer(store, blob(v1)); fs.mkdirSync(`${r}/t1`); await linkLayers({ store: store.dir, tree: `${r}/t1`, diffIds: [v1.diffId], hardlinkPrefixes: ['usr'] }); sync(); }));
  rows.baseline.push(await time(() => { sh('cp', ['-al', `${r}/untar`, `${r}/cpal`]); sync(); for (const l of [a, b]) sh('tar', ['-xzf', l.file, '-C', `${r}/cpal`]); sync(); }));
  rows.update.push(await time(async () => { for (const l of [v1, a, b]) await importLayer(store, blob(l)); fs.mkdirSync(`${r}/t2`); await linkLayers({ store: store.dir, tree: `${r}/t2`, diffIds: [v1.diffId, a.diffId, b.diffId], hardlinkPrefixes: ['usr'] }); sync(); }));
  rm(r);
}
const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
const fsType = execFileSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' }).trim();
console.log(`layer store, ${FILES} files (${(v1.size / 1e6).toFixed(1)} MB gzip) + 2 × 200, on ${fsType} (${dir}), medians of 3:`);
console.log(`| row | ms | baseline ms | ratio |\n| --- | --- | --- | --- |`);
console.log(`| first install: import + link + sync -f vs tar -xzf + sync -f | ${m.install.toFixed(0)} | ${m.untar.toFixed(0)} | ${(m.install / m.untar).toFixed(2)} × |`);
console.log(`| update (2 new layers on top): import + link + sync -f vs cp -al + sync -f + tar -xzf of the new layers + sync -f | ${m.update.toFixed(0)} | ${m.baseline.toFixed(0)} | ${(m.update / m.baseline).toFixed(2)} × |`);
rm(dir);
