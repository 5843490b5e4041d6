/**
 * `npm run bench`: stagedroot against cp -al, cp -a --reflink=auto, rsync --link-dest
 * and ostree, on generated trees of 10,000 and 100,000 files and one update, in one
 * run; then the same update on btrfs, XFS and ext4 loop mounts (made by the bench). Prints
 * medians and the target ratios and writes them to BENCHMARKS.md.
 *
 *   --quick                  every target ratio, fast: 1 round, no ostree, rsync, full
 *                            copy, verify or XFS rows (context for no target)
 *   --cli                    only the CLI rows (scripts/bench/cli.mjs: the CLI's
 *                            start against `node -e 0`, a CLI stage on 50,000 files;
 *                            scripts/bench/boot-dir.mjs: open + status with --boot-dir),
 *                            about a minute; replaces their section of BENCHMARKS.md
 *   --boot-dir               only the boot-directory row (scripts/bench/boot-dir.mjs:
 *                            open + status with and without --boot-dir, in process);
 *                            prints its target row, writes nothing
 *   --finalize               only the finalize rows (scripts/bench/finalize.mjs: finalize
 *                            of a booted sysroot with a local etc/ change to merge, at
 *                            each size); prints its target row, writes nothing
 *   BENCH_CLI_STARTS=15      --cli: rounds of the start rows
 *   BENCH_CLI_STAGES=3       --cli: rounds of the stage row (0: none, the start rows alone in ~1 min)
 *   --stage                  only the stage rows of the ext4 and btrfs loop mounts
 *                            (scripts/bench/stage-rows.mjs: each stage interleaved
 *                            with cp -al + sync -f, the manifest step); writes nothing
 *   --image                  only the image rows (scripts/bench/image-stage.mjs: stage of an
 *                            OCI layout through the layer store: a first install against
 *                            tar -xzf, an update with a new layer on top and one with a
 *                            changed middle layer against cp -al + tar -xzf of the new
 *                            layers, each + sync -f), on the bench directory's filesystem
 *                            and on ext4 and XFS loop mounts; replaces their section of BENCHMARKS.md
 *   BENCH_IMAGE_FILES=20000  the image rows' base layer, in files
 *   BENCH_IMAGE_LOOPS=ext4,xfs  the loop mounts of the image rows ("" for none)
 *   --registry               only the registry pull rows (scripts/bench/registry-pull.mjs:
 *                            a first pull from docker-registry on loopback against skopeo
 *                            copy docker://… oci:DIR, interleaved, and the bytes an update
 *                            sharing the base layer fetches); replaces their section of
 *                            BENCHMARKS.md
 *   BENCH_PULL_MB=48         the registry rows' base layer, in MiB
 *   BENCH_REPS=5             repetitions per measurement (median reported; 1 with --quick)
 *   BENCH_SIZES=10000,100000 tree sizes in files
 *   BENCH_SEED=20240611      the seed of the generated trees and update
 *   BENCH_DIR=/var/tmp       where the trees are built (one filesystem; needs ~3 GB)
 *   BENCH_OUT=BENCHMARKS.md  the report ("-" to print only)
 */
import { performance } from 'node:perf_hooks';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTEXT_ROUNDS, prepareSize } from './bench/measure-size.mjs';
import { FILESYSTEM_HEADING, REFERENCE_HEADING, filesystemTargets, referenceTargets, resultsTable, targetsTable } from './bench/report.mjs';
import { loopMount } from './bench/loop-mount.mjs';
import { ensureTools, run, versionOf } from './bench/tools.mjs';
import { bootDirTarget, cliSection, measureCli, spliceCliSection } from './bench/cli.mjs';
import { measureBootDir } from './bench/boot-dir.mjs';
import { finalizeRow, measureFinalize } from './bench/finalize.mjs';
import { measureStageRows } from './bench/stage-rows.mjs';
import { imageSection, measureImageLoops, measureImageRows, spliceImageSection } from './bench/image-stage.mjs';
import { measureRegistryPull, registryPullMissing, registrySection, spliceRegistrySection } from './bench/registry-pull.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const cliOnly = process.argv.includes('--cli');
const finalizeOnly = process.argv.includes('--finalize');
const stageOnly = process.argv.includes('--stage');
const imageOnly = process.argv.includes('--image');
const registryOnly = process.argv.includes('--registry');
const reps = Number(process.env.BENCH_REPS ?? (quick ? 1 : 5));
const sizes = (process.env.BENCH_SIZES ?? '10000,100000').split(',').map((s) => Number(s.trim()));
const seed = Number(process.env.BENCH_SEED ?? 20240611);
const out = process.env.BENCH_OUT ?? path.join(repoRoot, 'BENCHMARKS.md');
if (!Number.isInteger(reps) || reps < 1) throw new Error(`BENCH_REPS must be a positive integer, got ${process.env.BENCH_REPS}`);
if (sizes.some((n) => !Number.isInteger(n) || n < 100)) throw new Error(`BENCH_SIZES must be integers of at least 100, got ${process.env.BENCH_SIZES}`);

const log = (m) => console.log(m);
const started = performance.now();
const cliWhen = () => `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench${cliOnly ? ' -- --cli' : ''}\`; load average at the start ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (2 cores: above 2, every process waits for a core, Node's start included). Each command is a fresh process, timed from spawn to exit; the rounds interleave the commands.`;

if (process.argv.includes('--boot-dir')) {
  const load = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const b = await measureBootDir({ dir: fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-bench-boot-dir-')), log, rounds: Number(process.env.BENCH_BOOT_DIR_ROUNDS ?? 41) });
  console.log(`load average at the start ${load}, at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log(JSON.stringify(bootDirTarget(b)));
  process.exit(0);
}

if (cliOnly) {
  const when = cliWhen();
  const m = await measureCli({ dir: fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-bench-cli-')), seed, log, starts: Number(process.env.BENCH_CLI_STARTS ?? 15), stages: Number(process.env.BENCH_CLI_STAGES ?? 3) });
  const bootDir = await measureBootDir({ dir: fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-bench-boot-dir-')), log });
  const section = cliSection(m, targetsTable, when, bootDir);
  console.log(`\n${section}\n(run took ${((performance.now() - started) / 60000).toFixed(1)} min)`);
  if (out !== '-' && fs.existsSync(out)) {
    fs.writeFileSync(out, spliceCliSection(fs.readFileSync(out, 'utf8'), section));
    log(`updated its section of ${out}`);
  }
  process.exit(0);
}

/** The registry rows, or why they could not be measured here. */
async function registryRows(o) {
  const why = registryPullMissing();
  if (why) {
    log(`NOTE: no registry rows: ${why}`);
    return { why };
  }
  return measureRegistryPull({ base: process.env.BENCH_DIR ?? '/var/tmp', log, ...o });
}

if (registryOnly) {
  const when = `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench -- --registry\`.`;
  const section = registrySection(await registryRows({ reps: Number(process.env.BENCH_REPS ?? 5) }), targetsTable, when);
  console.log(`\n${section}\n(run took ${((performance.now() - started) / 60000).toFixed(1)} min)`);
  if (out !== '-' && fs.existsSync(out)) {
    fs.writeFileSync(out, spliceRegistrySection(fs.readFileSync(out, 'utf8'), section));
    log(`updated its section of ${out}`);
  }
  process.exit(0);
}

if (imageOnly) {
  const when = `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench -- --image\`.`;
  const res = await measureImageRows({ base: process.env.BENCH_DIR ?? '/var/tmp', reps: Number(process.env.BENCH_REPS ?? 3), log });
  const loops = await measureImageLoops({ base: process.env.BENCH_DIR ?? '/var/tmp', reps: Number(process.env.BENCH_REPS ?? 3), log });
  const section = imageSection(res, targetsTable, when, loops);
  console.log(`\n${section}\n(run took ${((performance.now() - started) / 60000).toFixed(1)} min)`);
  if (out !== '-' && fs.existsSync(out)) {
    fs.writeFileSync(out, spliceImageSection(fs.readFileSync(out, 'utf8'), section));
    log(`updated its section of ${out}`);
  }
  process.exit(0);
}

if (stageOnly) {
  const dir = fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-bench-stage-'));
  try {
    console.log(`\n${await measureStageRows({ base: dir, sizes, seed, reps, log })}\nload average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  } finally {
    spawnSync('rm', ['-rf', dir]);
  }
  process.exit(0);
}

if (finalizeOnly) {
  const dir = fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-bench-finalize-'));
  try {
    const res = await measureFinalize({ dir, sizes, seed, reps, log });
    console.log(`\n${targetsTable([finalizeRow(res)])}\n\nload average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; samples: ${res.map((r) => `${r.files}: ${r.finalize.map((ms) => ms.toFixed(0)).join(', ')} ms`).join('; ')}`);
  } finally {
    spawnSync('rm', ['-rf', dir]);
  }
  process.exit(0);
}

const { available, notes } = quick ? { available: {}, notes: ['--quick: ostree, rsync, the full copy, verify and the XFS rows are not run'] } : ensureTools([{ cmd: 'ostree', pkg: 'ostree' }, { cmd: 'rsync', pkg: 'rsync' }], log);
for (const n of notes) log(`NOTE: ${n}`);
const tools = { ostree: available.ostree ?? false, rsync: available.rsync ?? false };

const base = fs.mkdtempSync(path.join(process.env.BENCH_DIR ?? os.tmpdir(), 'stagedroot-bench-'));
let fsType;
try {
  fsType = run('findmnt', ['-no', 'FSTYPE', '-T', base]).trim();
} catch {
  fsType = run('stat', ['-f', '-c', '%T', base]).trim();
}
const env = {
  cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`,
  memory: `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
  kernel: os.release(),
  fs: fsType,
  node: process.version,
  load: os.loadavg().map((x) => x.toFixed(2)).join(' '),
  ostree: tools.ostree ? `ostree ${/Version:\s*'?([\d.]+)/.exec(run('ostree', ['--version']))?.[1] ?? '?'}` : 'not available',
  rsync: tools.rsync ? versionOf('rsync').replace(/\s+/g, ' ') : 'not available',
  cp: versionOf('cp'),
};
log(`stagedroot benchmark: sizes ${sizes.join(', ')}, ${reps} repetitions, seed ${seed}, in ${base} (${fsType})`);

log('the CLI rows');
const cliWhenFull = cliWhen();
const cli = await measureCli({ dir: path.join(base, 'cli'), seed, log, starts: quick ? 7 : 15, stages: quick ? 1 : reps });
log('the image rows (the layer store)');
const imageWhen = `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC in this run.`;
const images = await measureImageRows({ base, reps: quick ? 1 : Math.min(reps, 3), log });
const imageLoops = await measureImageLoops({ base, reps: quick ? 1 : Math.min(reps, 3), log });
const bootDirSamples = await measureBootDir({ dir: path.join(base, 'boot-dir'), log });
log('the registry pull rows');
const registryWhen = `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC in this run.`;
const pulls = await registryRows({ reps: quick ? 1 : reps });

const results = [];
/** Rows of the other filesystems: name -> { results } or { why } when it could not be made. */
const others = [];
const loops = [];
try {
  const prepared = [];
  for (const files of sizes) {
    log(`${files.toLocaleString('en-US')} files (${fsType}):`);
    prepared.push(await prepareSize({ dir: path.join(base, String(files)), files, seed, reps, tools, log, context: !quick, verify: !quick }));
  }
  // Sizes interleaved round by round: the size ratios (finalize, rollback) then compare
  // measurements from the same stretch of time on this shared machine.
  for (let r = 0; r < reps; r++) for (const p of prepared) await p.round(r);
  for (const p of prepared) results.push(await p.finish());
  // The same update on btrfs (trees are subvolumes, stage snapshots), XFS (reflinks) and a
  // loop-mounted ext4 (the portable path, on a filesystem of its own).
  for (const type of quick ? ['btrfs', 'ext4'] : ['btrfs', 'xfs', 'ext4']) {
    const m = loopMount(base, type, 8);
    if (m.why) {
      log(`NOTE: no ${type} rows: ${m.why}`);
      others.push({ type, why: m.why });
      continue;
    }
    loops.push(m);
    const onFs = [];
    for (const files of sizes) {
      log(`${files.toLocaleString('en-US')} files (${type} loop mount):`);
      onFs.push(await prepareSize({ dir: path.join(m.dir, String(files)), files, seed, reps, tools: { ostree: false, rsync: false }, log, context: false, verify: false }));
    }
    for (let r = 0; r < reps; r++) for (const p of onFs) await p.round(r);
    const res = [];
    for (const p of onFs) res.push(await p.finish());
    others.push({ type, results: res });
    m.cleanup();
    loops.pop();
  }
} finally {
  for (const m of loops) m.cleanup();
  // ostree's deployments are immutable (chattr +i): a failed run leaves them for `chattr -i`.
  spawnSync('rm', ['-rf', base]);
}

const table = resultsTable(results);
const referenceTable = targetsTable(referenceTargets(results));
const filesystemTable = targetsTable(filesystemTargets([{ type: fsType, results }, ...others]));
const otherTables = others.map((o) => `### ${o.type} (loop mount made by the bench)\n\n${o.why ? `Not measured: ${o.why}.` : resultsTable(o.results)}`).join('\n\n');
const minutes = ((performance.now() - started) / 60000).toFixed(1);
console.log(`\n${table}\n\n${otherTables}\n\n${filesystemTable}\n\n${referenceTable}\n\n(run took ${minutes} min)`);

if (out !== '-') {
  const notesFile = path.join(repoRoot, 'scripts/bench/NOTES.md');
  const analysis = fs.existsSync(notesFile) ? fs.readFileSync(notesFile, 'utf8').trim() : '';
  const g = results[results.length - 1].stats;
  const doc = `# Benchmarks

Generated by \`npm run bench\` (scripts/bench.mjs) on ${new Date().toISOString().slice(0, 10)}; the whole run took ${minutes} min.
Every figure is a median over ${reps} round${reps === 1 ? '' : 's'} of this one run${quick ? ' (`--quick`)' : ''} (status and rollback have more
samples, the full copy and rsync fewer: see Method); ratios compare medians measured in the
same run, on the same trees and the same update.

${cliSection(cli, targetsTable, cliWhenFull, bootDirSamples)}
${imageSection(images, targetsTable, imageWhen, imageLoops)}
${registrySection(pulls, targetsTable, registryWhen)}
${FILESYSTEM_HEADING}

${filesystemTable}

${REFERENCE_HEADING}

${referenceTable}

## Results

### ${fsType} (the bench directory's filesystem)

${table}

${otherTables}

## Method

- **Trees.** Generated from seed ${seed}: a deep \`usr/\` of package trees (\`usr/lib/PKG/...\`,
  \`usr/share/PKG/...\` up to 6 levels, \`usr/share/doc\`, \`usr/include\`, a flat \`usr/bin\`)
  of many small files (100 B–8 KiB, log-uniform), one large file in a thousand (256 KiB–2 MiB),
  \`.so\` symlinks, a kernel and initramfs in \`usr/lib/modules/\`, an \`etc/\` of small
  configs (3 % of the files) and usrmerge symlinks. The largest tree: ${g.files.toLocaleString('en-US')} files,
  ${g.symlinks} symlinks, ${(g.bytes / 1e6).toFixed(0)} MB.
- **Update.** One native update spec (\`update.json\`): ${g.modified} files modified, ${g.added} added
  (some in a new directory), ${g.removed} removed. The "new tree" for rsync and ostree is the base
  with that update applied.
- **stagedroot.** A sysroot initialised from the base tree. One round: \`stage\` of the spec in
  a child process with the default copy policy (hardlink \`usr/\`, reflink-or-copy the rest),
  durable (one \`sync -f\` before the rename), timed around \`Sysroot.stage()\`, and the
  child's peak RSS read from \`VmHWM\`/\`maxRSS\` (the child has loaded its modules first, as a
  running agent has; Node's start is not timed); the same with the hardlink policy (every
  top-level directory hardlinked, as \`cp -al\` does), then discarded; \`verify\` of the
  staged tree (every file hashed); \`finalize\`; \`status\` five times (a fresh
  \`Sysroot.open()\` + \`status()\`, in process); \`rollback\`; \`prune --keep 0\` removing
  the rolled-back deployment, which brings the sysroot back to where the round started.
  After the rounds, ${4 * reps} more \`rollback\`s between two good deployments (it is cheap,
  and its median should not rest on ${reps} samples).
- **References.** \`cp -al\` and \`cp -a --reflink=auto\` of the booted tree (the tree stage
  starts from, to a path as deep as stage's), \`rsync -a --link-dest=BOOTED NEW/ DEST/\`
  (builds the updated tree, hardlinking unchanged files), each also shown with the \`sync -f\`
  that makes the result durable as a stage is. \`cp -al\` runs every round; the full copy
  and rsync, context for no target and the slowest part of a round, in the first
  ${CONTEXT_ROUNDS(reps)} rounds. ostree (${env.ostree}): a sysroot set up as ostree's tests do it (\`ostree admin init-fs\`,
  \`ostree admin os-init\`, repo in \`ostree/repo\`, a stub syslinux \`boot/loader\`,
  \`--sysroot\`), the base tree (with \`etc/\` moved to \`usr/etc\`) committed and deployed
  once; each round times \`ostree commit --orphan\` of the new tree and \`ostree admin deploy
  --no-prune\` of that commit, then undeploys it (untimed; undeploy prunes its objects).
  \`--no-prune\` leaves the repo prune a plain deploy does out of ostree's time.
- **Fairness.** One round runs every tool once, and the rounds of the two sizes alternate, so
  a slow phase of the shared machine hits every tool and both sizes alike; \`sync\` runs
  (untimed) before each timed operation so that none pays for an earlier one's writeback.
  Caches are warm for every tool alike.
- **Machine.** ${env.cpu}, ${env.memory}, Linux ${env.kernel}, ${env.fs} at the tree location,
  Node ${env.node}, ${env.cp}, ${env.rsync}; load average at the start ${env.load}. The
  machine is shared with other work, so absolute times vary between runs; the ratios are
  the figures to read.
${notes.length ? `\nTool notes for this run:\n\n${notes.map((n) => `- ${n}`).join('\n')}\n` : ''}${analysis ? `\n${analysis}\n` : ''}`;
  fs.writeFileSync(out, doc);
  log(`wrote ${out}`);
}
