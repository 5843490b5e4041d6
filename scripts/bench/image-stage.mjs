/**
 * The image rows of `npm run bench` (the layer store, issue 29), each against its baseline
 * in the same process, medians of BENCH_REPS (default 3), under BENCH_DIR (default
 * /var/tmp: the root filesystem). A generated image: a base layer of FILES files (default
 * 20,000; BENCH_IMAGE_FILES) of 50–4,000 bytes in directories of 100 under usr/share, and
 * small layers of 200 files each. Every stage is `Sysroot.stage` of a local OCI layout:
 * - first install: stage of v1 = [base, a] on a fresh sysroot (its empty first
 *   deployment), against `tar -xzf` of both layers + `sync -f`;
 * - update, changed layer on top: v1 booted (staged, finalized, booted, marked good,
 *   pruned to one), stage of v2 = [base, a, b], against `cp -al` of the booted tree +
 *   `sync -f` + `tar -xzf` of b + `sync -f`;
 * - update, changed layer in the middle: [base, a, b] booted, stage of [base, a', b]
 *   against `cp -al` + `sync -f` + `tar -xzf` of a' and b + `sync -f`;
 * - each update also against `umoci unpack` of the new image + `sync -f` (a tool without a
 *   layer store unpacks the whole image again): the issue's ≤ 0.1 × rows.
 * Each stage prints the time of its steps (plan: the import of new layers; copy; apply:
 * the link; manifest; validate; sync; commit); BENCH_IMAGE_PROF=DIR writes the main
 * thread's CPU profile of each update stage there. Run alone: `node scripts/bench/image-stage.mjs`
 * (dist/ built first). BENCH_IMAGE_LOOPS=ext4,xfs (the default; "" for none) measures the
 * same rows again on loop mounts of those filesystems made under BENCH_DIR (loop-mount.mjs),
 * each its own sysroot and image, one after the other.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Sysroot } from '../../dist/index.js';
import { prng } from './prng.mjs';
import { loopMount } from './loop-mount.mjs';

const sh = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], maxBuffer: 1 << 30 });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = async (f) => {
  const t = performance.now();
  await f();
  return performance.now() - t;
};

function genTree(root, n, seed, prefix) {
  const rand = prng(seed).next;
  for (let i = 0; i < n; i++) {
    const d = path.join(root, prefix, `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(d, `f${i}`), Buffer.alloc(50 + Math.floor(rand() * 3950), (i + seed) % 251));
  }
}

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

/** A gzip layer of a generated tree: its file, digest, diff_id, size. */
function layerOf(dir, name, n, seed, prefix, extra = {}) {
  const src = path.join(dir, `src-${name}`);
  genTree(src, n, seed, prefix);
  for (const [rel, text] of Object.entries(extra)) {
    fs.mkdirSync(path.dirname(path.join(src, rel)), { recursive: true });
    fs.writeFileSync(path.join(src, rel), text);
  }
  const tgz = path.join(dir, `${name}.tar.gz`);
  sh('tar', ['--numeric-owner', '--owner=0', '--group=0', '-czf', tgz, '-C', src, '.']);
  fs.rmSync(src, { recursive: true });
  const data = fs.readFileSync(tgz);
  const diffId = `sha256:${sha256(execFileSync('gzip', ['-dc', tgz], { maxBuffer: 1 << 30 }))}`;
  return { file: tgz, digest: `sha256:${sha256(data)}`, diffId, size: data.length };
}

/** An OCI layout of these layers (blobs hardlinked from the layer files). */
function layout(dir, layers, version) {
  fs.mkdirSync(path.join(dir, 'blobs/sha256'), { recursive: true });
  const put = (data) => {
    const hex = sha256(data);
    fs.writeFileSync(path.join(dir, 'blobs/sha256', hex), data);
    return { digest: `sha256:${hex}`, size: data.length };
  };
  for (const l of layers) {
    const to = path.join(dir, 'blobs/sha256', l.digest.slice(7));
    if (!fs.existsSync(to)) fs.linkSync(l.file, to);
  }
  const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch] ?? process.arch;
  const config = put(Buffer.from(JSON.stringify({ architecture: arch, os: 'linux', config: { Labels: { 'org.opencontainers.image.version': version } }, rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) } })));
  const manifest = put(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: layers.map((l) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: l.digest, size: l.size })) })));
  fs.writeFileSync(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  fs.writeFileSync(path.join(dir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', ...manifest, annotations: { 'org.opencontainers.image.ref.name': 'bench' } }] }));
  return dir;
}

/** A stage with the time of each of its steps (from a step's first progress event to the next's). */
async function timedStage(sysroot, src) {
  const steps = {};
  let at = null;
  let last = performance.now();
  const t0 = last;
  const r = await sysroot.stage(src, {
    onProgress: (p) => {
      if (p.phase === at) return;
      const now = performance.now();
      if (at !== null) steps[at] = (steps[at] ?? 0) + now - last;
      at = p.phase;
      last = now;
    },
  });
  const end = performance.now();
  if (at !== null) steps[at] = (steps[at] ?? 0) + end - last;
  return { ms: end - t0, steps, r };
}

async function bootIt(sysroot) {
  await sysroot.finalize();
  await sysroot.boot();
  await sysroot.markGood();
  await sysroot.prune({ keep: 1 });
}

export async function measureImageRows({ base = process.env.BENCH_DIR ?? '/var/tmp', files = Number(process.env.BENCH_IMAGE_FILES ?? 20_000), reps = Number(process.env.BENCH_REPS ?? 3), log = console.log } = {}) {
  const dir = fs.mkdtempSync(path.join(base, 'image-stage-bench-'));
  const sync = () => sh('sync', ['-f', dir]);
  try {
    const L = {
      base: layerOf(dir, 'base', files, 1, 'usr/share', { 'etc/os-release': 'ID=bench\n' }),
      a: layerOf(dir, 'a', 200, 2, 'usr/share/a'),
      a2: layerOf(dir, 'a2', 200, 5, 'usr/share/a'),
      b: layerOf(dir, 'b', 200, 3, 'usr/lib/b'),
    };
    const v1 = layout(path.join(dir, 'v1'), [L.base, L.a], '1');
    const v2 = layout(path.join(dir, 'v2'), [L.base, L.a, L.b], '2');
    const v3 = layout(path.join(dir, 'v3'), [L.base, L.a2, L.b], '3');
    const rows = { untar: [], install: [], topBase: [], top: [], midBase: [], mid: [], umociTop: [], umociMid: [] };
    // The issue's other reference: a whole unpack of the new image by umoci (+ sync -f), as a tool without a layer store pays.
    const umociUnpack = (image, r) => time(() => {
      sh('umoci', ['unpack', '--image', `${image}:bench`, `${r}/umoci`]);
      sync();
    });
    const steps = { install: [], top: [], mid: [] };
    const loads = [];
    for (let round = 0; round < reps; round++) {
      loads.push(os.loadavg()[0]);
      const r = path.join(dir, `r${round}`);
      fs.mkdirSync(r);
      rows.untar.push(await time(() => {
        fs.mkdirSync(`${r}/untar`);
        for (const l of [L.base, L.a]) sh('tar', ['-xzf', l.file, '-C', `${r}/untar`]);
        sync();
      }));
      const sysroot = await Sysroot.init(`${r}/sysroot`);
      const install = await timedStage(sysroot, v1);
      rows.install.push(install.ms);
      steps.install.push(install.steps);
      await bootIt(sysroot);
      const booted = install.r.path;
      rows.topBase.push(await time(() => {
        sh('cp', ['-al', booted, `${r}/cpal`]);
        sync();
        sh('tar', ['-xzf', L.b.file, '-C', `${r}/cpal`]);
        sync();
      }));
      fs.rmSync(`${r}/cpal`, { recursive: true });
      rows.umociTop.push(await umociUnpack(v2, r));
      fs.rmSync(`${r}/umoci`, { recursive: true });
      const top = await profiled(`top-${round}`, () => timedStage(sysroot, v2));
      rows.top.push(top.ms);
      steps.top.push(top.steps);
      await bootIt(sysroot);
      rows.midBase.push(await time(() => {
        sh('cp', ['-al', top.r.path, `${r}/cpal`]);
        sync();
        for (const l of [L.a2, L.b]) sh('tar', ['-xzf', l.file, '-C', `${r}/cpal`]);
        sync();
      }));
      fs.rmSync(`${r}/cpal`, { recursive: true });
      rows.umociMid.push(await umociUnpack(v3, r));
      fs.rmSync(`${r}/umoci`, { recursive: true });
      const mid = await profiled(`middle-${round}`, () => timedStage(sysroot, v3));
      rows.mid.push(mid.ms);
      steps.mid.push(mid.steps);
      log(`  image stage round ${round + 1}: install ${install.ms.toFixed(0)} ms (tar ${rows.untar.at(-1).toFixed(0)}) ${fmt(install.steps)}; top ${top.ms.toFixed(0)} ms (baseline ${rows.topBase.at(-1).toFixed(0)}, umoci ${rows.umociTop.at(-1).toFixed(0)}) ${fmt(top.steps)}; middle ${mid.ms.toFixed(0)} ms (baseline ${rows.midBase.at(-1).toFixed(0)}, umoci ${rows.umociMid.at(-1).toFixed(0)}) ${fmt(mid.steps)}`);
      fs.rmSync(r, { recursive: true, force: true });
    }
    const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
    const stepMedians = (list) => Object.fromEntries([...new Set(list.flatMap((x) => Object.keys(x)))].map((k) => [k, median(list.map((x) => x[k] ?? 0))]));
    const fsType = execFileSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' }).trim();
    return {
      files,
      reps,
      fsType,
      loads,
      baseMB: L.base.size / 1e6,
      rows: [
        { name: 'image first install: stage of v1 (2 layers) vs tar -xzf of its layers + sync -f', ms: m.install, baseline: m.untar, target: 1.3, steps: stepMedians(steps.install) },
        { name: 'image update, new layer on top: stage vs cp -al + sync -f + tar -xzf of it + sync -f', ms: m.top, baseline: m.topBase, target: 1.5, steps: stepMedians(steps.top) },
        { name: 'image update, changed layer in the middle: stage vs cp -al + sync -f + tar -xzf of the 2 layers from it up + sync -f', ms: m.mid, baseline: m.midBase, target: 1.5, steps: stepMedians(steps.mid) },
        { name: 'image update, new layer on top: stage vs umoci unpack of the new image + sync -f', ms: m.top, baseline: m.umociTop, target: 0.1 },
        { name: 'image update, changed layer in the middle: stage vs umoci unpack of the new image + sync -f', ms: m.mid, baseline: m.umociMid, target: 0.1 },
      ],
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The image rows on each filesystem of BENCH_IMAGE_LOOPS (default ext4,xfs), a loop mount of
 * 2 GiB under `base`: [{ type, res }] or [{ type, why }] where one could not be made.
 */
export async function measureImageLoops({ base = process.env.BENCH_DIR ?? '/var/tmp', log = console.log, ...o } = {}) {
  const types = (process.env.BENCH_IMAGE_LOOPS ?? 'ext4,xfs').split(',').filter((t) => t !== '');
  const out = [];
  for (const type of types) {
    const m = loopMount(base, type, 2);
    if (m.why) {
      log(`NOTE: no image rows on ${type}: ${m.why}`);
      out.push({ type, why: m.why });
      continue;
    }
    try {
      log(`the image rows on a ${type} loop mount`);
      out.push({ type, res: await measureImageRows({ ...o, base: m.dir, log }) });
    } finally {
      m.cleanup();
    }
  }
  return out;
}

/** BENCH_IMAGE_PROF=DIR: the main thread's CPU profile of each update stage (DIR/NAME.cpuprofile). */
async function profiled(name, f) {
  const to = process.env.BENCH_IMAGE_PROF;
  if (!to) return f();
  const { Session } = await import('node:inspector/promises');
  const s = new Session();
  s.connect();
  await s.post('Profiler.enable');
  await s.post('Profiler.start');
  try {
    return await f();
  } finally {
    const { profile } = await s.post('Profiler.stop');
    fs.mkdirSync(to, { recursive: true });
    fs.writeFileSync(path.join(to, `${name}.cpuprofile`), JSON.stringify(profile));
    s.disconnect();
  }
}

const fmt = (s) => `[${Object.entries(s).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}]`;

export const IMAGE_HEADING = '## Image stages (the layer store)';

/** The rows as targetsTable (report.mjs) takes them. */
export function imageTargets(res) {
  return res.rows.map((r) => ({ target: `${r.name} ≤ ${r.target} ×`, measured: `${r.ms.toFixed(0)} ms / ${r.baseline.toFixed(0)} ms`, ratio: `${(r.ms / r.baseline).toFixed(2)} ×`, pass: r.ms / r.baseline <= r.target }));
}

/** The section of BENCHMARKS.md: the targets, where each stage's time went, and NOTES-image.md (the profiles' reading). */
export function imageSection(res, targetsTable, when, loops = []) {
  const notesFile = new URL('./NOTES-image.md', import.meta.url);
  const notes = fs.existsSync(notesFile) ? `\n${fs.readFileSync(notesFile, 'utf8').trim()}\n` : '';
  const steps = (res) => res.rows.filter((r) => r.steps).map((r) => `- ${r.name.split(':')[0]}: ${Object.entries(r.steps).map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')}`).join('\n');
  const loads = (res) => res.loads.map((x) => x.toFixed(2)).join(', ');
  const others = loops
    .map((l) =>
      l.why
        ? `### On a ${l.type} loop mount\n\nNot measured: ${l.why}.\n`
        : `### On a ${l.type} loop mount\n\nThe same rows on a ${l.res.fsType} loop mount made by the bench (2 GiB), measured after the rows above; load average at each round's start ${loads(l.res)}.\n\n${targetsTable(imageTargets(l.res))}\n\nWhere each stage's time went (medians):\n\n${steps(l.res)}\n`,
    )
    .join('\n');
  return `${IMAGE_HEADING}

${when} On ${res.fsType}, ${res.files.toLocaleString('en-US')} files in the base layer (${res.baseMB.toFixed(1)} MB gzip) and layers of 200 files, medians of ${res.reps} round${res.reps === 1 ? '' : 's'}; load average at each round's start ${loads(res)} (2 cores). Every stage is \`Sysroot.stage\` of a local OCI layout, its baseline timed in the same round (scripts/bench/image-stage.mjs).

${targetsTable(imageTargets(res))}

Where each stage's time went (medians, from each step's first progress event to the next; plan includes the import of the layers the store lacks and, for an update over an image deployment, the copy of its usr/ that starts before the plan):

${steps(res)}
${others === '' ? '' : `\n${others}`}${notes}`;
}

/** Replaces the image section of BENCHMARKS.md (or adds it before Results). */
export function spliceImageSection(doc, section) {
  const at = doc.indexOf(IMAGE_HEADING);
  if (at >= 0) {
    const next = doc.indexOf('\n## ', at + IMAGE_HEADING.length);
    return doc.slice(0, at) + section + (next >= 0 ? doc.slice(next) : '');
  }
  const results = doc.indexOf('\n## Results');
  return results >= 0 ? `${doc.slice(0, results + 1)}${section}\n${doc.slice(results + 1)}` : `${doc}\n${section}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const res = await measureImageRows();
  const loops = await measureImageLoops();
  const { targetsTable } = await import('./report.mjs');
  console.log(imageSection(res, targetsTable, `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC.`, loops));
}
