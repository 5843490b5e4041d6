/**
 * `npm run bench -- --finalize`: only the finalize rows (finalize follows the change,
 * not the tree). For each size, a sysroot initialised from the generated tree and
 * booted (so that finalize merges the running system's etc/ into the staged deployment, as
 * at every shutdown); each round stages the update in a child process, makes a local change
 * in the booted etc/ (a carried file), times `finalize`, then rolls back and prunes the
 * finalized deployment (untimed). The rounds of the sizes interleave.
 */
import { performance } from 'node:perf_hooks';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Sysroot } from '../../dist/index.js';
import { generate } from './generate-tree.mjs';
import { median } from './report.mjs';
import { settle, stageInChild } from './tools.mjs';

/** Returns [{ files, samples: { finalize: [ms], manifestBytes, overlayBytes } }] per size. */
export async function measureFinalize({ dir, sizes, seed, reps, log }) {
  const prepared = [];
  for (const files of sizes) {
    const d = path.join(dir, String(files));
    fs.mkdirSync(d, { recursive: true });
    const gen = generate(d, files, seed);
    const sysrootDir = path.join(d, 'stagedroot');
    await Sysroot.init(sysrootDir, { fromDirectory: gen.base, label: 'base' });
    const sys = await Sysroot.open(sysrootDir);
    await sys.boot();
    log(`  finalize: ${files.toLocaleString('en-US')} files ready`);
    prepared.push({ files, gen, sysrootDir, samples: [], sizes: {} });
  }
  for (let r = 0; r < reps; r++) {
    for (const p of prepared) {
      const st = stageInChild(p.sysrootDir, p.gen.specPath);
      const sys = await Sysroot.open(p.sysrootDir);
      const booted = sys.status().booted;
      // A local change the merge carries into the staged tree.
      fs.writeFileSync(path.join(p.sysrootDir, `deploy/${booted}/tree/etc/bench-local-${r}.conf`), `round ${r}\n`);
      settle();
      const t0 = performance.now();
      await sys.finalize();
      const ms = performance.now() - t0;
      p.samples.push(ms);
      const deploy = path.join(p.sysrootDir, 'deploy', st.id);
      for (const n of fs.readdirSync(deploy)) if (n.startsWith('manifest')) p.sizes[n] = fs.statSync(path.join(deploy, n)).size;
      await sys.rollback();
      await sys.prune({ keep: 0 });
      fs.rmSync(path.join(p.sysrootDir, `deploy/${booted}/tree/etc/bench-local-${r}.conf`));
      log(`  finalize ${p.files.toLocaleString('en-US')} files, round ${r + 1}/${reps}: ${ms.toFixed(0)} ms (${Object.entries(p.sizes).map(([n, b]) => `${n} ${b} B`).join(', ')})`);
    }
  }
  for (const p of prepared) spawnSync('rm', ['-rf', path.dirname(p.sysrootDir)]);
  return prepared.map((p) => ({ files: p.files, finalize: p.samples, median: median(p.samples), files_: p.sizes }));
}

/** The finalize scaling row, as the targets table prints it. */
export function finalizeRow(res) {
  const small = res.reduce((a, b) => (b.files < a.files ? b : a));
  const big = res.reduce((a, b) => (b.files > a.files ? b : a));
  const x = big.median / small.median;
  const n = (v) => v.toLocaleString('en-US');
  return { target: `finalize ≤ 1.5 × its time at ${n(small.files)} (${n(big.files)} vs ${n(small.files)} files)`, measured: `${big.median.toFixed(0)} / ${small.median.toFixed(0)} ms`, ratio: `${x.toFixed(2)}×`, pass: x <= 1.5 };
}
