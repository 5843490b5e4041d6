/**
 * The measurements for one tree size: `prepareSize` builds the trees and sysroots,
 * `round(r)` runs every tool once, `finish()` adds the extra rollback samples, cleans up
 * and returns the samples. The caller interleaves the rounds of all sizes, so that a
 * slow phase of the shared machine hits every tool and every size alike (the
 * finalize and rollback targets compare two sizes).
 */
import { performance } from 'node:perf_hooks';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Sysroot } from '../../dist/index.js';
import { isSubvolume } from '../../dist/fs/trees/storage.js';
import { generate } from './generate-tree.mjs';
import { ostreeRound, setupOstree, unlockDeployments } from './ostree.mjs';
import { run, settle, stageInChild, timeCmd } from './tools.mjs';

/** Rounds that also run the full copy and rsync (context for no target, and slow). */
export const CONTEXT_ROUNDS = (reps) => Math.min(reps, 2);

function now() {
  return performance.now();
}

/** Times `fn` (sync or async) in milliseconds. */
async function timed(fn) {
  const t0 = now();
  const value = await fn();
  return { ms: now() - t0, value };
}

export async function prepareSize(o) {
  const { dir, files, seed, reps, tools, log } = o;
  // context: the full copy and rsync (context for no target); verify: a whole-tree hash
  // each round. Both off for the quick mode and the rows of the other filesystems.
  const context = o.context ?? true;
  const verify = o.verify ?? true;
  fs.mkdirSync(dir, { recursive: true });
  let t = now();
  const gen = generate(dir, files, seed);
  log(`  generated ${gen.stats.files} files, ${gen.stats.symlinks} symlinks, ${(gen.stats.bytes / 1e6).toFixed(0)} MB in ${((now() - t) / 1000).toFixed(1)} s`);

  t = now();
  const sysrootDir = path.join(dir, 'stagedroot');
  await Sysroot.init(sysrootDir, { fromDirectory: gen.base, label: 'base' });
  log(`  stagedroot sysroot initialised in ${((now() - t) / 1000).toFixed(1)} s`);
  let ostree = null;
  if (tools.ostree) {
    t = now();
    ostree = setupOstree(path.join(dir, 'ostree'), gen.ostreeBase);
    log(`  ostree sysroot initialised (base committed and deployed) in ${((now() - t) / 1000).toFixed(1)} s`);
  }

  const samples = {};
  const add = (k, v) => (samples[k] ??= []).push(v);
  const rss = [];
  const rm = (p) => run('rm', ['-rf', p]);
  const deployed = path.join(sysrootDir, 'deploy/0001/tree');
  // The references copy the same booted tree as stage, to a path just as deep. On btrfs
  // the booted tree is a subvolume, which no hardlink leaves (EXDEV): there they copy
  // the generated base tree, the same files in the filesystem's top subvolume.
  const booted = isSubvolume(deployed) ? gen.base : deployed;
  const scratch = path.join(dir, 'reference/work/0000/tree');
  fs.mkdirSync(path.dirname(scratch), { recursive: true });
  const topDirs = fs.readdirSync(booted, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  const HARDLINK_ALL = { hardlinkPrefixes: topDirs, mode: 'reflink' };

  // cp -al is a target's reference: every round. The full copy and rsync are context
  // (and the slowest part of a round): the first CONTEXT_ROUNDS rounds.
  const references = (r) => {
    settle();
    add('cp -al', timeCmd('cp', ['-al', booted, scratch]).ms);
    add('cp -al: sync -f', timeCmd('sync', ['-f', scratch]).ms);
    rm(scratch);
    if (!context || r >= CONTEXT_ROUNDS(reps)) return;
    settle();
    add('cp -a --reflink=auto', timeCmd('cp', ['-a', '--reflink=auto', booted, scratch]).ms);
    add('cp -a --reflink=auto: sync -f', timeCmd('sync', ['-f', scratch]).ms);
    rm(scratch);
    if (tools.rsync) {
      settle();
      add('rsync -a --link-dest', timeCmd('rsync', ['-a', `--link-dest=${booted}`, `${gen.newTree}/`, `${scratch}/`]).ms);
      add('rsync -a --link-dest: sync -f', timeCmd('sync', ['-f', scratch]).ms);
      rm(scratch);
    }
  };

  // stagedroot: the lifecycle of one update, ending where it started.
  const lifecycle = async () => {
    settle();
    const all = stageInChild(sysrootDir, gen.specPath, { policy: HARDLINK_ALL });
    add('stage (hardlink all)', all.ms);
    const sys = await Sysroot.open(sysrootDir);
    await sys.discardStaged();
    settle();
    const st = stageInChild(sysrootDir, gen.specPath);
    add('stage', st.ms);
    add('event-loop delay', st.eldMaxMs);
    add('event-loop busy', st.busyMaxMs);
    if (st.cpuMaxMs !== null) add('event-loop cpu', st.cpuMaxMs);
    for (const [step, ms] of Object.entries(st.steps ?? {})) add(`stage step: ${step}`, ms);
    rss.push(Math.max(st.maxRssKb, all.maxRssKb, st.vmHwmKb ?? 0, all.vmHwmKb ?? 0) * 1024);
    if (verify) {
      settle();
      const v = await timed(() => sys.verify(st.id));
      if (v.value.drift.length > 0) throw new Error(`verify of ${st.id} found drift: ${JSON.stringify(v.value.drift.slice(0, 3))}`);
      add('verify', v.ms);
    }
    settle();
    add('finalize', (await timed(() => sys.finalize())).ms);
    for (let i = 0; i < 5; i++) add('status', (await timed(async () => (await Sysroot.open(sysrootDir)).status())).ms);
    settle();
    add('rollback', (await timed(() => sys.rollback())).ms);
    settle();
    const p = await timed(() => sys.prune({ keep: 0 }));
    if (p.value.removed.length !== 1) throw new Error(`prune removed ${JSON.stringify(p.value.removed)}, expected one deployment`);
    add('prune', p.ms);
  };

  const round = async (r) => {
    const started = now();
    // Alternate the order, so neither side always runs after the other's deletions.
    if (r % 2 === 0) {
      references(r);
      await lifecycle();
    } else {
      await lifecycle();
      references(r);
    }
    if (ostree) {
      const o2 = ostreeRound(ostree, gen.ostreeNew);
      add('ostree commit', o2.commit);
      add('ostree admin deploy', o2.deploy);
      add('ostree commit + deploy', o2.commit + o2.deploy);
    }
    const last = Object.entries(samples).map(([k, xs]) => `${k} ${xs[xs.length - 1].toFixed(0)}`).join(', ');
    log(`  ${files.toLocaleString('en-US')} files, round ${r + 1}/${reps} done in ${((now() - started) / 1000).toFixed(1)} s: ${last} ms`);
  };

  // More rollback samples (it is cheap): with two good deployments, rollback swaps them.
  const finish = async () => {
    const sys = await Sysroot.open(sysrootDir);
    stageInChild(sysrootDir, gen.specPath);
    await sys.finalize();
    await sys.boot();
    await sys.markGood();
    for (let i = 0; i < 4 * reps; i++) {
      settle();
      add('rollback', (await timed(() => sys.rollback())).ms);
    }

    for (const k of ['cp -al', 'cp -a --reflink=auto', 'rsync -a --link-dest']) {
      if (!samples[k]) continue;
      samples[`${k} + sync -f`] = samples[k].map((ms, i) => ms + samples[`${k}: sync -f`][i]);
      delete samples[`${k}: sync -f`];
    }
    if (ostree) unlockDeployments(ostree);
    rm(dir);
    return { files, stats: gen.stats, samples, peakRssBytes: Math.max(...rss) };
  };
  return { round, finish };
}
