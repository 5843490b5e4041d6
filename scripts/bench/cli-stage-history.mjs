/**
 * A CLI `stage` of a 200-file Ignition update on a 50,000-file tree against `cp -al` +
 * `sync -f` of the booted tree, as issue 29's independent measurement took it, and the
 * factors in which it differs from the CLI row of scripts/bench/cli.mjs, one at a time,
 * in the same rounds:
 *
 *   flat + history   the independent measurement: a tree of 100-file directories
 *                    (usr/share/dNNN/fNN, 50–4,000 bytes), `init --from` it on this
 *                    filesystem; each round an Ignition config writing 200 files (100
 *                    overwritten, 100 new) is staged, then finalize, boot, mark-good and
 *                    `prune --keep 1`: the next stage starts from a tree a stage made
 *   flat + discard   the same tree, the bench's history: stage then discard (the booted
 *                    tree stays init's)
 *   bench + history  the bench's generated tree (generate-tree.mjs: deep package trees,
 *                    etc/ of 3 %, a few large files), the Ignition update, history as above
 *   bench + discard  the bench's tree and history (the CLI row, with the Ignition update)
 *
 * Each variant's baseline is `cp -al` of its own booted tree + `sync -f` of the copy, in
 * the same round; `sync` (untimed) before every timed command. Wall and CPU (user + sys,
 * wait4) medians.
 *
 *   node scripts/bench/cli-stage-history.mjs [--rounds N] [--files N] [--dir DIR] [--only a,b]
 */
import { performance } from 'node:perf_hooks';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generate } from './generate-tree.mjs';
import { prng, randomPool } from './prng.mjs';
import { median } from './report.mjs';
import { run } from './tools.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
const CLI = path.join(repoRoot, pkg.bin.stagedroot);
const RUSAGE = fileURLToPath(new URL('./rusage.py', import.meta.url));

/** Wall and CPU (user + sys) ms of one process (wait4 through rusage.py). */
function timed(cmd, args) {
  const r = spawnSync('python3', [RUSAGE, cmd, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  const m = /\nrusage: ([\d.]+) ([\d.]+) (-?\d+)\n$/.exec(r.stderr);
  if (r.status !== 0 || m === null || m[3] !== '0') throw new Error(`${cmd} ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim().slice(-1500)}`);
  return { wall: Number(m[1]), cpu: Number(m[2]) };
}
const cli = (...args) => run(process.execPath, [CLI, ...args]);

/** The flat tree: `files` files in 100-file directories under usr/share, 50–4,000 bytes each. */
export function flatTree(dir, files, seed) {
  const rng = prng(seed);
  const pool = randomPool(rng, 1 << 20);
  fs.mkdirSync(path.join(dir, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'etc/os-release'), 'ID=bench\n');
  for (let i = 0; i < files; i++) {
    const d = path.join(dir, 'usr/share', `d${String(Math.floor(i / 100)).padStart(4, '0')}`);
    if (i % 100 === 0) fs.mkdirSync(d, { recursive: true });
    const size = rng.int(50, 4000);
    const off = rng.int(0, pool.length - size);
    fs.writeFileSync(path.join(d, `f${String(i % 100).padStart(2, '0')}`), pool.subarray(off, off + size));
  }
  return dir;
}

/** Regular files under `root/usr` (relative paths), sorted. */
function usrFiles(root) {
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else if (e.isFile() && fs.statSync(path.join(root, r)).size <= 64 * 1024) out.push(r);
    }
  };
  walk('usr');
  return out.sort();
}

/** An Ignition config writing 200 files: 100 of the tree's overwritten, 100 new beside others; `tag` makes each round's contents its own. */
function ignitionConfig(files, rng, tag) {
  const picked = rng.sample(files, 200);
  const entries = [
    ...picked.slice(0, 100).map((rel) => `/${rel}`),
    ...picked.slice(100).map((rel, i) => `/${path.posix.dirname(rel)}/new-${tag}-${i}`),
  ];
  return {
    ignition: { version: '3.4.0' },
    storage: {
      files: entries.map((p) => ({ path: p, overwrite: true, mode: 0o644, contents: { source: `data:,${encodeURIComponent(`${tag} ${p}\n${'x'.repeat(rng.int(50, 4000))}`)}` } })),
    },
  };
}

export async function measureStageHistory(o) {
  const { dir, log } = o;
  const rounds = o.rounds ?? 5;
  const files = o.files ?? 50_000;
  const only = o.only ?? ['flat + history', 'flat + discard', 'bench + history', 'bench + discard'];
  fs.mkdirSync(dir, { recursive: true });
  const rng = prng(o.seed ?? 20240611);
  const trees = {};
  const t0 = performance.now();
  if (only.some((v) => v.startsWith('flat'))) trees.flat = flatTree(path.join(dir, 'flat'), files, o.seed ?? 20240611);
  if (only.some((v) => v.startsWith('bench'))) trees.bench = generate(path.join(dir, 'bench'), files, o.seed ?? 20240611, { ostree: false }).base;
  const variants = only.map((name) => {
    const [shape, history] = name.split(' + ');
    const sysroot = path.join(dir, `sysroot-${shape}-${history}`);
    cli('init', '--sysroot', sysroot, '--from', trees[shape]);
    return { name, shape, history, sysroot, candidates: usrFiles(trees[shape]), samples: { stage: [], base: [], cycle: [] } };
  });
  log(`  trees and ${variants.length} sysroots made in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) {
      const cfg = path.join(dir, `round-${v.shape}-${v.history}-${r}.ign`);
      fs.writeFileSync(cfg, JSON.stringify(ignitionConfig(v.candidates, rng, `r${r}`)));
      const tree = currentTree(v.sysroot);
      const scratch = path.join(dir, 'reference/work/0000/tree');
      fs.mkdirSync(path.dirname(scratch), { recursive: true });
      const baseline = () => {
        run('sync', []);
        const cp = timed('cp', ['-al', tree, scratch]);
        const sf = timed('sync', ['-f', scratch]);
        v.samples.base.push({ wall: cp.wall + sf.wall, cpu: cp.cpu + sf.cpu });
        run('rm', ['-rf', scratch]);
      };
      const stage = () => {
        run('sync', []);
        v.samples.stage.push(timed(process.execPath, [CLI, 'stage', '--sysroot', v.sysroot, cfg]));
        if (v.history === 'history') {
          const c0 = performance.now();
          cli('finalize', '--sysroot', v.sysroot);
          cli('boot', '--sysroot', v.sysroot);
          cli('mark-good', '--sysroot', v.sysroot);
          cli('prune', '--sysroot', v.sysroot, '--keep', '1');
          v.samples.cycle.push(performance.now() - c0);
        } else {
          cli('discard', '--sysroot', v.sysroot);
        }
      };
      for (const step of r % 2 === 0 ? [baseline, stage] : [stage, baseline]) step();
      const s = v.samples.stage.at(-1);
      const b = v.samples.base.at(-1);
      log(`  round ${r + 1}/${rounds} ${v.name}: stage ${s.wall.toFixed(0)} ms (CPU ${s.cpu.toFixed(0)}), cp -al + sync -f ${b.wall.toFixed(0)} ms (CPU ${b.cpu.toFixed(0)}) from ${path.relative(v.sysroot, tree)}; load ${os.loadavg()[0].toFixed(2)}`);
    }
  }
  run('rm', ['-rf', dir]);
  return variants.map((v) => {
    const m = (xs, k) => median(xs.map((x) => x[k]));
    return { name: v.name, stage: { wall: m(v.samples.stage, 'wall'), cpu: m(v.samples.stage, 'cpu') }, base: { wall: m(v.samples.base, 'wall'), cpu: m(v.samples.base, 'cpu') }, rounds, files, cycle: v.samples.cycle.length ? median(v.samples.cycle) : null, samples: v.samples };
  });
}

/** The booted (current) deployment's tree. */
function currentTree(sysroot) {
  return path.join(sysroot, 'deploy', fs.readlinkSync(path.join(sysroot, 'current')).split('/').filter(Boolean).find((p) => /^\d{4}$/.test(p)) ?? '', 'tree');
}

export function historyRows(res) {
  return res.map((v) => `| ${v.name} | ${v.stage.wall.toFixed(0)} / ${v.base.wall.toFixed(0)} ms | ${(v.stage.wall / v.base.wall).toFixed(2)}× | ${v.stage.cpu.toFixed(0)} / ${v.base.cpu.toFixed(0)} ms | ${(v.stage.cpu / v.base.cpu).toFixed(2)}× |`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (k, d) => {
    const i = process.argv.indexOf(k);
    return i >= 0 ? process.argv[i + 1] : d;
  };
  const load0 = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const res = await measureStageHistory({
    dir: fs.mkdtempSync(path.join(arg('--dir', '/var/tmp'), 'stagedroot-bench-history-')),
    rounds: Number(arg('--rounds', 5)),
    files: Number(arg('--files', 50_000)),
    only: arg('--only', undefined)?.split(','),
    log: (m) => console.log(m),
  });
  console.log(`\n| variant | stage / cp -al + sync -f, wall | ratio | CPU | CPU ratio |\n|---|---:|---:|---:|---:|\n${historyRows(res).join('\n')}`);
  console.log(`load average at the start ${load0}, at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
}
