/**
 * The CLI rows: the CLI as the boot path runs it, each command a fresh process timed
 * from spawn to exit, against `node -e 0` (Node's own start) in the same rounds:
 *   - `stagedroot --version`, `status`, `boot` (nothing to do: a good deployment, no
 *     tries), `mark-good`, on a tiny sysroot (two files);
 *   - importing the library (`await import('stagedroot')`: package.json's exports, dist/lib/index.mjs);
 *   - a CLI `stage` of the bench's 200-file update (100 modified, 50 added, 50 removed)
 *     on a 50,000-file tree, against `cp -al` + `sync -f` of that tree (the booted tree,
 *     to a path as deep as stage's); `discard` after each, untimed;
 *   - the same stage as a machine runs it (scripts/bench/cli-stage-history.mjs): an Ignition
 *     config writing 200 files on a tree of 100-file directories, each stage followed by
 *     finalize, boot, mark-good and `prune --keep 1`, against `cp -al` + `sync -f` of the
 *     booted tree in the same rounds (the case the row above missed: its tree's many
 *     directories make `cp -al` dear, and its stage always starts from init's tree).
 * Rounds interleave the commands, so that a slow stretch of the shared machine hits all.
 */
import { performance } from 'node:perf_hooks';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generate } from './generate-tree.mjs';
import { measureStageHistory } from './cli-stage-history.mjs';
import { median } from './report.mjs';
import { run } from './tools.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// The bin as `npm install -g` links it, and the library as `import('stagedroot')` resolves it (package.json's exports).
const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
const CLI = path.join(repoRoot, pkg.bin.stagedroot);
const LIBRARY = new URL(pkg.exports['.'].import, `file://${repoRoot}/`).href;
const RUSAGE = fileURLToPath(new URL('./rusage.py', import.meta.url));
const hasPython = spawnSync('python3', ['-c', '0']).status === 0;
const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

/** Wall milliseconds of one process, from spawn to exit; throws when it fails. */
function spawnMs(cmd, args, env = process.env) {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}: ${(r.stderr || r.stdout).trim().slice(-1000)}`);
  return ms;
}

/**
 * Wall and CPU (user + sys) milliseconds of one process, through rusage.py (wait4's
 * rusage: Node's spawnSync has none); only wall where python3 is missing.
 */
function spawnTimed(cmd, args, env) {
  if (!hasPython) return { wall: spawnMs(cmd, args, env) };
  const r = spawnSync('python3', [RUSAGE, cmd, ...args], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'pipe'] });
  const m = /\nrusage: ([\d.]+) ([\d.]+) (-?\d+)\n$/.exec(r.stderr);
  if (r.status !== 0 || m === null || m[3] !== '0') throw new Error(`${cmd} ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim().slice(-1000)}`);
  return { wall: Number(m[1]), cpu: Number(m[2]) };
}

/**
 * `o.dir`: scratch (one filesystem); `o.starts`: rounds of the start rows; `o.stages`:
 * rounds of the stage row (0: not run); `o.files`: the stage row's tree size.
 */
export async function measureCli(o) {
  const { dir, log } = o;
  const starts = o.starts ?? 15;
  const stages = o.stages ?? 3;
  const files = o.files ?? 50_000;
  fs.mkdirSync(dir, { recursive: true });
  const samples = {};
  const add = (k, v) => (samples[k] ??= []).push(v);

  // The tiny sysroot (a stage of the boot path runs on a real one: the state file is what they read either way).
  const tiny = path.join(dir, 'tiny');
  fs.mkdirSync(path.join(tiny, 'etc'), { recursive: true });
  fs.mkdirSync(path.join(tiny, 'usr/bin'), { recursive: true });
  fs.writeFileSync(path.join(tiny, 'etc/os-release'), 'ID=bench\n');
  fs.writeFileSync(path.join(tiny, 'usr/bin/true'), '#!/bin/sh\n', { mode: 0o755 });
  const sysroot = path.join(dir, 'tiny-sysroot');
  run(process.execPath, [CLI, 'init', '--sysroot', sysroot, '--from', tiny]);
  // The boot record the initramfs writes is elsewhere on a real machine: none here (boot then uses no try of a good deployment).
  const env = { ...process.env, STAGEDROOT_SYSROOT: sysroot };
  const rows = [
    ['node -e 0', [process.execPath, ['-e', '0']]],
    ['stagedroot --version', [process.execPath, [CLI, '--version']]],
    ['stagedroot status', [process.execPath, [CLI, 'status']]],
    ['stagedroot boot', [process.execPath, [CLI, 'boot']]],
    ['stagedroot mark-good', [process.execPath, [CLI, 'mark-good']]],
    ['import the library', [process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(LIBRARY)})`]]],
  ];
  for (const [, [cmd, args]] of rows) spawnMs(cmd, args, env); // warm the page cache
  const cpu = {};
  for (let r = 0; r < starts; r++) {
    for (const [k, [cmd, args]] of rows) {
      const t = spawnTimed(cmd, args, env);
      add(k, t.wall);
      if (t.cpu !== undefined) (cpu[k] ??= []).push(t.cpu);
    }
  }
  log(`  start rows: ${rows.map(([k]) => `${k} ${fmt(median(samples[k]))}${cpu[k] ? ` (CPU ${fmt(median(cpu[k]))})` : ''}`).join(', ')} ms (median of ${starts})`);

  let stats = null;
  if (stages > 0) {
    let t = performance.now();
    const gen = generate(path.join(dir, 'trees'), files, o.seed ?? 20240611, { ostree: false });
    stats = gen.stats;
    const big = path.join(dir, 'sysroot');
    run(process.execPath, [CLI, 'init', '--sysroot', big, '--from', gen.base]);
    log(`  ${files.toLocaleString('en-US')}-file tree generated and its sysroot initialised in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const booted = path.join(big, 'deploy/0001/tree');
    const scratch = path.join(dir, 'reference/work/0000/tree');
    fs.mkdirSync(path.dirname(scratch), { recursive: true });
    for (let r = 0; r < stages; r++) {
      const reference = () => {
        run('sync', []);
        const cp = spawnMs('cp', ['-al', booted, scratch]);
        add('cp -al + sync -f', cp + spawnMs('sync', ['-f', scratch]));
        run('rm', ['-rf', scratch]);
      };
      const stage = () => {
        run('sync', []);
        add('stagedroot stage (CLI)', spawnMs(process.execPath, [CLI, 'stage', '--sysroot', big, gen.specPath]));
        run(process.execPath, [CLI, 'discard', '--sysroot', big]);
      };
      // Alternate the order, so neither side always runs after the other's deletions.
      for (const step of r % 2 === 0 ? [reference, stage] : [stage, reference]) step();
      log(`  stage round ${r + 1}/${stages}: stage ${fmt(samples['stagedroot stage (CLI)'].at(-1))} ms, cp -al + sync -f ${fmt(samples['cp -al + sync -f'].at(-1))} ms`);
    }
  }
  if (stages > 0) {
    const [h] = await measureStageHistory({ dir: path.join(dir, 'history'), rounds: stages, files, only: ['flat + history'], seed: o.seed, log });
    for (const x of h.samples.stage) {
      add('stagedroot stage, booted history (CLI)', x.wall);
      (cpu['stagedroot stage, booted history (CLI)'] ??= []).push(x.cpu);
    }
    for (const x of h.samples.base) {
      add('cp -al + sync -f, flat tree', x.wall);
      (cpu['cp -al + sync -f, flat tree'] ??= []).push(x.cpu);
    }
  }
  run('rm', ['-rf', dir]);
  return { samples, cpu, stats, files, starts, stages };
}

/** The targets of the CLI's start and its stage, from measureCli's samples. */
export function cliTargets(m) {
  const med = (k) => median(m.samples[k]);
  const node = med('node -e 0');
  const out = [];
  const ratio = (target, a, b, bound) => ({ target, measured: `${fmt(a)} / ${fmt(b)} ms`, ratio: `${(a / b).toFixed(2)}×`, pass: a / b <= bound });
  // CPU (user + sys) beside the wall time: on a loaded machine a short process's wall time is mostly its wait for a core.
  const cpuMed = (k) => (m.cpu?.[k]?.length ? median(m.cpu[k]) : undefined);
  const withCpu = (row, k, how) => {
    const a = cpuMed(k);
    const b = cpuMed('node -e 0');
    return a === undefined || b === undefined ? row : { ...row, measured: `${row.measured}; CPU ${fmt(a)} / ${fmt(b)} ms`, ratio: `${row.ratio} (CPU ${how(a, b)})` };
  };
  for (const k of ['stagedroot status', 'stagedroot --version', 'stagedroot boot', 'stagedroot mark-good']) {
    out.push(withCpu(ratio(`\`${k}\`${k.endsWith('boot') ? ' (nothing to do)' : ''} ≤ 1.5 × \`node -e 0\``, med(k), node, 1.5), k, (a, b) => `${(a / b).toFixed(2)}×`));
  }
  const lib = med('import the library');
  out.push(withCpu({ target: 'importing the library ≤ 100 ms on top of `node -e 0`', measured: `${fmt(lib)} / ${fmt(node)} ms`, ratio: `+${fmt(lib - node)} ms`, pass: lib - node <= 100 }, 'import the library', (a, b) => `+${fmt(a - b)} ms`));
  if (m.samples['stagedroot stage (CLI)']) {
    out.push(ratio(`CLI stage of a 200-file update ≤ 1.5 × cp -al + sync -f (ext4, ${m.files.toLocaleString('en-US')} files)`, med('stagedroot stage (CLI)'), med('cp -al + sync -f'), 1.5));
  }
  const h = 'stagedroot stage, booted history (CLI)';
  if (m.samples[h]) {
    const k = 'cp -al + sync -f, flat tree';
    const row = ratio(`CLI stage of a 200-file Ignition update after stage, finalize, boot, mark-good, prune --keep 1 ≤ 1.5 × cp -al + sync -f (ext4, ${m.files.toLocaleString('en-US')} files in 100-file directories)`, med(h), med(k), 1.5);
    const a = cpuMed(h);
    const b = cpuMed(k);
    out.push(a === undefined || b === undefined ? row : { ...row, measured: `${row.measured}; CPU ${fmt(a)} / ${fmt(b)} ms`, ratio: `${row.ratio} (CPU ${(a / b).toFixed(2)}×)` });
  }
  return out;
}

export const CLI_ROWS = [
  ['node -e 0', '`node -e 0` (Node\'s own start: the reference)'],
  ['stagedroot --version', '`stagedroot --version`'],
  ['stagedroot status', '`stagedroot status` (tiny sysroot)'],
  ['stagedroot boot', '`stagedroot boot` (nothing to do)'],
  ['stagedroot mark-good', '`stagedroot mark-good`'],
  ['import the library', '`node --input-type=module -e "await import(\'stagedroot\')"`'],
  ['stagedroot stage (CLI)', 'CLI `stagedroot stage` of the 200-file update (50,000-file tree; Node\'s start included)'],
  ['cp -al + sync -f', '`cp -al` + `sync -f` of that tree'],
  ['stagedroot stage, booted history (CLI)', 'CLI `stagedroot stage` of a 200-file Ignition update, each after the previous one\'s finalize, boot, mark-good, prune --keep 1 (50,000 files in 100-file directories)'],
  ['cp -al + sync -f, flat tree', '`cp -al` + `sync -f` of that booted tree'],
];

export function cliResultsTable(m) {
  const lines = ['| operation (a fresh process each) | median ms (min–max) | CPU ms, user + sys (median) | samples |', '|---|---:|---:|---:|'];
  for (const [k, label] of CLI_ROWS) {
    const xs = m.samples[k];
    if (!xs) continue;
    const cpu = m.cpu?.[k]?.length ? fmt(median(m.cpu[k])) : '';
    lines.push(`| ${label} | ${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}) | ${cpu} | ${xs.length} |`);
  }
  return lines.join('\n');
}

/** The boot-directory target from measureBootDir's samples (scripts/bench/boot-dir.mjs). */
export function bootDirTarget(b) {
  const a = median(b['open + status, --boot-dir']);
  const r = median(b['open + status']);
  const cpu = b['cpu: open + status']?.length ? [median(b['cpu: open + status, --boot-dir']), median(b['cpu: open + status'])] : null;
  return {
    target: '`open` + `status` with a boot directory ≤ 1.2 × without (two deployments, 12 MB kernel + 48 MB initramfs each; in process)',
    measured: `${a.toFixed(2)} / ${r.toFixed(2)} ms${cpu ? `; CPU ${cpu[0].toFixed(2)} / ${cpu[1].toFixed(2)} ms` : ''}`,
    ratio: `${(a / r).toFixed(2)}×${cpu ? ` (CPU ${(cpu[0] / cpu[1]).toFixed(2)}×)` : ''}`,
    pass: a / r <= 1.2,
  };
}

/** BENCHMARKS.md's heading of the CLI's section: the key a `--cli` run finds it by (spliceCliSection). */
export const CLI_HEADING = '## Targets: the CLI on the boot path (its start, its stage, the boot directory)';

/** The section BENCHMARKS.md shows for these rows (a `--cli` run replaces it in place). */
export function cliSection(m, targetsTable, when, bootDir) {
  const rows = [...cliTargets(m), ...(bootDir ? [bootDirTarget(bootDir)] : [])];
  // Why a miss is a miss, with the profile that shows it: scripts/bench/NOTES-cli.md (hand-written).
  const notesFile = path.join(repoRoot, 'scripts/bench/NOTES-cli.md');
  const notes = fs.existsSync(notesFile) ? `\n${fs.readFileSync(notesFile, 'utf8').trim()}\n` : '';
  return `${CLI_HEADING}

${when}

${targetsTable(rows)}

${cliResultsTable(m)}
${notes}`;
}

/** BENCHMARKS.md's text with the section replaced (or put before the first other Targets section). */
export function spliceCliSection(doc, section) {
  const head = CLI_HEADING;
  const at = doc.indexOf(head);
  if (at >= 0) {
    const next = doc.indexOf('\n## ', at + head.length);
    return doc.slice(0, at) + section + (next >= 0 ? doc.slice(next) : '');
  }
  const first = doc.indexOf('\n## ');
  return first >= 0 ? `${doc.slice(0, first + 1)}${section}\n${doc.slice(first + 1)}` : `${doc}\n${section}`;
}
