/**
 * `npm run bench -- --stage`: only the stage rows of the loop mounts (ext4: the portable
 * path; btrfs: snapshots), at each size, each stage interleaved with `cp -al` + `sync -f`
 * of the same tree (the order alternating round by round), the staged deployment
 * discarded after each. Prints the medians, the ratios against the targets and the
 * manifest step; writes nothing. BENCH_STAGE_FS=ext4,btrfs picks the filesystems;
 * BENCH_STAGE_ALT=PATH/stage-child.mjs (another build's, e.g. a copy of main's dist and
 * scripts) stages in each round too, so that two builds compare in one run;
 * BENCH_STAGE_PROF=DIR: one more stage per size, after the rounds, under node
 * --cpu-prof (a profile per thread in DIR/TYPE-FILES, the tree workers' included).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as os from 'node:os';
import { Sysroot } from '../../dist/index.js';
import { isSubvolume } from '../../dist/fs/trees/storage.js';
import { generate } from './generate-tree.mjs';
import { loopMount } from './loop-mount.mjs';
import { median } from './report.mjs';
import { run, settle, stageInChild, timeCmd } from './tools.mjs';


const ALT = process.env.BENCH_STAGE_ALT;

async function prepare(dir, files, seed, log) {
  fs.mkdirSync(dir, { recursive: true });
  const gen = generate(dir, files, seed);
  const sysrootDir = path.join(dir, 'stagedroot');
  await Sysroot.init(sysrootDir, { fromDirectory: gen.base, label: 'base' });
  const deployed = path.join(sysrootDir, 'deploy/0001/tree');
  const booted = isSubvolume(deployed) ? gen.base : deployed;
  const scratch = path.join(dir, 'reference/work/0000/tree');
  fs.mkdirSync(path.dirname(scratch), { recursive: true });
  const s = { files, stage: [], ref: [], manifest: [], loads: [], alt: [], altManifest: [] };
  const reference = () => {
    settle();
    s.ref.push(timeCmd('cp', ['-al', booted, scratch]).ms + timeCmd('sync', ['-f', scratch]).ms);
    run('rm', ['-rf', scratch]);
  };
  const stageWith = async (child, times, manifests) => {
    settle();
    const st = stageInChild(sysrootDir, gen.specPath, { child });
    times.push(st.ms);
    manifests.push(st.steps?.manifest ?? NaN);
    await (await Sysroot.open(sysrootDir)).discardStaged();
  };
  const steps = [reference, () => stageWith(undefined, s.stage, s.manifest), ...(ALT ? [() => stageWith(ALT, s.alt, s.altManifest)] : [])];
  const round = async (r) => {
    s.loads.push(os.loadavg()[0]);
    // Each round starts with another step, so that none always runs after another's writes.
    for (let i = 0; i < steps.length; i++) await steps[(r + i) % steps.length]();
    const alt = ALT ? `, alt stage ${s.alt.at(-1).toFixed(0)} ms (manifest ${s.altManifest.at(-1).toFixed(0)})` : '';
    log(`  ${files} files, round ${r + 1}: stage ${s.stage.at(-1).toFixed(0)} ms (manifest ${s.manifest.at(-1).toFixed(0)})${alt}, cp -al + sync -f ${s.ref.at(-1).toFixed(0)} ms, load ${s.loads.at(-1).toFixed(2)}`);
  };
  const profile = async (to) => {
    settle();
    const st = stageInChild(sysrootDir, gen.specPath, { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${to}`] });
    log(`  ${files} files, profiled stage ${st.ms.toFixed(0)} ms (steps ${JSON.stringify(Object.fromEntries(Object.entries(st.steps).map(([k, v]) => [k, Math.round(v)])))}) -> ${to}`);
    await (await Sysroot.open(sysrootDir)).discardStaged();
  };
  return { s, round, profile };
}

export async function measureStageRows({ base, sizes, seed, reps, log }) {
  const types = (process.env.BENCH_STAGE_FS ?? 'ext4,btrfs').split(',');
  const rows = [];
  for (const type of types) {
    const m = loopMount(base, type, 8);
    if (m.why) {
      log(`NOTE: no ${type} rows: ${m.why}`);
      continue;
    }
    try {
      const prepared = [];
      for (const files of sizes) {
        log(`${files} files (${type} loop mount): preparing`);
        prepared.push(await prepare(path.join(m.dir, String(files)), files, seed, log));
      }
      for (let r = 0; r < reps; r++) for (const p of prepared) await p.round(r);
      if (process.env.BENCH_STAGE_PROF) for (const p of prepared) await p.profile(path.join(process.env.BENCH_STAGE_PROF, `${type}-${p.s.files}`));
      for (const p of prepared) rows.push({ type, ...p.s });
    } finally {
      m.cleanup();
    }
  }
  const ms = (xs) => `${median(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(', ')})`;
  const lines = rows.map((r) => {
    const alt = ALT ? `; alt stage ${ms(r.alt)}, manifest step ${ms(r.altManifest)}: ${(median(r.alt) / median(r.ref)).toFixed(2)}x` : '';
    return `${r.type} ${r.files}: stage ${ms(r.stage)}, manifest step ${ms(r.manifest)}, cp -al + sync -f ${ms(r.ref)}: ${(median(r.stage) / median(r.ref)).toFixed(2)}x${alt}; load ${r.loads.map((x) => x.toFixed(1)).join(', ')}`;
  });
  for (const type of types) {
    const of = rows.filter((r) => r.type === type);
    if (of.length < 2) continue;
    lines.push(`${type}: stage at ${of.at(-1).files} / at ${of[0].files}: ${(median(of.at(-1).stage) / median(of[0].stage)).toFixed(2)}x${ALT ? `; alt ${(median(of.at(-1).alt) / median(of[0].alt)).toFixed(2)}x` : ''}`);
  }
  return lines.join('\n');
}
