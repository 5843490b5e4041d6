/**
 * The registry pull's rows (`npm run bench`, and `npm run bench -- --registry` alone),
 * against Debian's docker-registry on loopback (plain http) with images pushed by skopeo:
 *
 * - a first pull's throughput against `skopeo copy docker://… oci:DIR` of the same image
 *   (a base layer of BENCH_PULL_MB MiB of random bytes and a small one), interleaved
 *   round by round, medians of BENCH_REPS (default 5): target ≥ 0.8 × skopeo's
 *   throughput. stagedroot's pull runs in this process (dist/'s pullImage), so its time
 *   has no process start; skopeo's has (its `skopeo --version` is given beside it).
 *   Each side's CPU time (user + sys: this process's for the pull, skopeo's from wait4 by
 *   rusage.py) is given too: on a loaded 2-core machine the wall clock is mostly waiting
 *   for a core.
 * - an update that shares the base layer: the bytes its pull fetches (the config and the
 *   new layer; the manifest is not counted by either side) against that layer's and the
 *   config's bytes: target ≤ 1.05.
 *
 *   node scripts/bench/registry-pull.mjs      (after npm run build; prints the section)
 *   BENCH_PULL_PROF=DIR                       one more pull of ours under the CPU profiler
 *   BENCH_PULL_ALT=OTHER/dist                 another build's pull in the same rounds (an A/B)
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { run } from './tools.mjs';

export const REGISTRY_HEADING = '## Registry pulls (docker:// against skopeo)';
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Why the rows cannot be measured here (a tool missing), or null. */
export function registryPullMissing() {
  for (const t of ['docker-registry', 'skopeo', 'umoci']) if (spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0) return `${t} is not installed (scripts/test-setup.sh installs it)`;
  return null;
}

/** `cmd args` timed (wall, from spawn to exit) with its CPU time (user + sys, wait4) by rusage.py. */
function timed(cmd, args) {
  const r = spawnSync('python3', [path.join(here, 'rusage.py'), cmd, ...args], { encoding: 'utf8', maxBuffer: 16 << 20 });
  const m = /rusage: ([\d.]+) ([\d.]+) (-?\d+)\s*$/.exec(r.stderr ?? '');
  if (!m || m[3] !== '0') throw new Error(`${cmd} ${args.join(' ')} failed: ${(r.stderr ?? '').trim().slice(-2000)}`);
  return { wall: Number(m[1]), cpu: Number(m[2]) };
}

export async function measureRegistryPull(o = {}) {
  const log = o.log ?? (() => {});
  const reps = o.reps ?? Number(process.env.BENCH_REPS ?? 5);
  const mib = o.mib ?? Number(process.env.BENCH_PULL_MB ?? 48);
  const dist = o.dist ?? path.join(repo, 'dist');
  const { pullImage } = await import(path.join(dist, 'sources/registry/pull.js'));
  const { parseDockerReference } = await import(path.join(dist, 'sources/registry/reference.js'));
  const altDist = o.alt ?? process.env.BENCH_PULL_ALT;
  const altPull = altDist ? (await import(path.join(path.resolve(altDist), 'sources/registry/pull.js'))).pullImage : null;
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const dir = fs.mkdtempSync(path.join(o.base ?? os.tmpdir(), 'stagedroot-bench-pull-'));
  const host = `127.0.0.1:${port}`;
  fs.writeFileSync(path.join(dir, 'registry.yml'), `version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/storage\nhttp:\n  addr: ${host}\n`);
  const registry = spawn('docker-registry', ['serve', path.join(dir, 'registry.yml')], { stdio: 'ignore' });
  try {
    for (let i = 0; ; i++) {
      const up = await new Promise((resolve) => net.connect(port, '127.0.0.1').on('connect', function () { this.destroy(); resolve(true); }).on('error', () => resolve(false)));
      if (up) break;
      if (i > 150) throw new Error(`docker-registry did not answer on ${host}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // v1: the base layer and a small one; v2: the same base and another small one.
    log(`registry pulls: a ${mib} MiB image pushed to docker-registry on ${host}`);
    const layout = path.join(dir, 'img');
    run('umoci', ['init', '--layout', layout]);
    const bundle = path.join(dir, 'bundle');
    const layer = (tag, from, file, bytes) => {
      if (from) run('umoci', ['unpack', '--rootless', '--image', `${layout}:${from}`, bundle]);
      else {
        run('umoci', ['new', '--image', `${layout}:${tag}`]);
        run('umoci', ['unpack', '--rootless', '--image', `${layout}:${tag}`, bundle]);
      }
      fs.mkdirSync(path.join(bundle, 'rootfs/usr'), { recursive: true });
      fs.writeFileSync(path.join(bundle, 'rootfs/usr', file), bytes);
      run('umoci', ['repack', '--image', `${layout}:${tag}`, bundle]);
      fs.rmSync(bundle, { recursive: true, force: true });
    };
    layer('base', null, 'base', randomBytes(mib * 1024 * 1024));
    run('umoci', ['tag', '--image', `${layout}:base`, 'v2']);
    layer('base', 'base', 'small', Buffer.from('v1 '.repeat(20000)));
    layer('v2', 'v2', 'small', Buffer.from('v2 '.repeat(30000)));
    for (const tag of ['base', 'v2']) run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}:${tag}`, `docker://${host}/bench/os:${tag}`]);
    const opts = { plainHttp: true, auth: null, registriesConf: null, policy: null };
    const ref = (tag) => parseDockerReference(`docker://${host}/bench/os:${tag}`);

    const ours = { wall: [], cpu: [] };
    const theirs = { wall: [], cpu: [] };
    const alt = { wall: [], cpu: [] };
    const start = [];
    const loads = [];
    for (let i = 0; i < reps; i++) {
      loads.push(os.loadavg()[0]);
      const a = path.join(dir, `ours-${i}`);
      const b = path.join(dir, `skopeo-${i}`);
      // the order alternates: neither side always follows the other's writes
      const inProcess = (pull, into, rows) => async () => {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await pull(ref('base'), into, opts);
        rows.wall.push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        rows.cpu.push((c.user + c.system) / 1000);
        fs.rmSync(into, { recursive: true, force: true });
      };
      const sides = [
        inProcess(pullImage, a, ours),
        ...(altPull ? [inProcess(altPull, `${a}-alt`, alt)] : []),
        async () => {
          const t = timed('skopeo', ['--insecure-policy', 'copy', '--quiet', '--src-tls-verify=false', `docker://${host}/bench/os:base`, `oci:${b}:base`]);
          theirs.wall.push(t.wall);
          theirs.cpu.push(t.cpu);
        },
      ];
      for (const side of i % 2 === 0 ? sides : sides.reverse()) await side();
      start.push(timed('skopeo', ['--version']).wall);
      fs.rmSync(a, { recursive: true, force: true });
      fs.rmSync(b, { recursive: true, force: true });
    }
    if (process.env.BENCH_PULL_PROF) {
      const { Session } = await import('node:inspector/promises');
      const session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
      await pullImage(ref('base'), path.join(dir, 'prof'), opts);
      const { profile } = await session.post('Profiler.stop');
      fs.mkdirSync(process.env.BENCH_PULL_PROF, { recursive: true });
      const f = path.join(process.env.BENCH_PULL_PROF, `pull-${Date.now()}.cpuprofile`);
      fs.writeFileSync(f, JSON.stringify(profile));
      log(`the CPU profile of one more pull: ${f}`);
    }

    const blobs = path.join(dir, 'update');
    await pullImage(ref('base'), blobs, opts);
    let fetched = 0;
    const r = await pullImage(ref('v2'), blobs, { ...opts, onBlob: (e) => (fetched += e.fetched) });
    const m = JSON.parse(fs.readFileSync(path.join(blobs, 'blobs', ...r.digest.split(':'))));
    const newBytes = m.config.size + m.layers.at(-1).size;
    const skopeoVersion = /version (\S+)/.exec(run('skopeo', ['--version']))?.[1] ?? '?';
    return {
      mib,
      reps,
      loads,
      fsType: spawnSync('df', ['--output=fstype', dir], { encoding: 'utf8' }).stdout.trim().split('\n').at(-1),
      skopeoVersion,
      ours: { wall: median(ours.wall), cpu: median(ours.cpu), walls: ours.wall },
      skopeo: { wall: median(theirs.wall), cpu: median(theirs.cpu), walls: theirs.wall, start: median(start) },
      ...(altPull ? { alt: { dist: altDist, wall: median(alt.wall), cpu: median(alt.cpu), walls: alt.wall } } : {}),
      update: { fetched, newBytes },
    };
  } finally {
    registry.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function registryTargets(res) {
  const throughput = res.skopeo.wall / res.ours.wall;
  const update = res.update.fetched / res.update.newBytes;
  return [
    { target: `first pull of ${res.mib} MiB: throughput ≥ 0.8 × skopeo copy's`, measured: `${res.ours.wall.toFixed(0)} ms / ${res.skopeo.wall.toFixed(0)} ms`, ratio: `${throughput.toFixed(2)} ×`, pass: throughput >= 0.8 },
    { target: 'update sharing the base layer: bytes fetched ≤ 1.05 × the new layer and config', measured: `${res.update.fetched} B / ${res.update.newBytes} B`, ratio: `${update.toFixed(3)} ×`, pass: update <= 1.05 },
  ];
}

/** The section of BENCHMARKS.md. */
export function registrySection(res, targetsTable, when) {
  if (res.why) return `${REGISTRY_HEADING}\n\n${when} Not measured: ${res.why}.\n`;
  const notesFile = new URL('./NOTES-registry.md', import.meta.url);
  const notes = fs.existsSync(notesFile) ? `\n${fs.readFileSync(notesFile, 'utf8').trim()}\n` : '';
  return `${REGISTRY_HEADING}

${when} A pull of \`docker://127.0.0.1:PORT/bench/os:base\` from Debian's docker-registry on loopback (plain http; the registry's storage and both destinations on ${res.fsType}): a base layer of ${res.mib} MiB of random bytes and a small one, stagedroot's \`pullImage\` (in the bench's process) against \`skopeo copy docker://… oci:DIR\` (skopeo ${res.skopeoVersion}, a process, its start included: \`skopeo --version\` takes ${res.skopeo.start.toFixed(0)} ms), the two interleaved round by round, medians of ${res.reps}; load average at each round's start ${res.loads.map((x) => x.toFixed(2)).join(', ')} (2 cores) (scripts/bench/registry-pull.mjs).

${targetsTable(registryTargets(res))}

CPU time (user + sys) of the first pull: stagedroot ${res.ours.cpu.toFixed(0)} ms, skopeo ${res.skopeo.cpu.toFixed(0)} ms. Each round's wall time: stagedroot ${res.ours.walls.map((x) => x.toFixed(0)).join(', ')} ms; skopeo ${res.skopeo.walls.map((x) => x.toFixed(0)).join(', ')} ms.${res.alt ? `\n\nIn the same rounds, the build in ${res.alt.dist}: ${res.alt.wall.toFixed(0)} ms (${(res.skopeo.wall / res.alt.wall).toFixed(2)} × skopeo's throughput), CPU ${res.alt.cpu.toFixed(0)} ms; each round ${res.alt.walls.map((x) => x.toFixed(0)).join(', ')} ms.` : ''}
${notes}`;
}

/** Replaces the registry section of BENCHMARKS.md (or adds it before the filesystem targets). */
export function spliceRegistrySection(doc, section) {
  const at = doc.indexOf(REGISTRY_HEADING);
  if (at >= 0) {
    const next = doc.indexOf('\n## ', at + REGISTRY_HEADING.length);
    return doc.slice(0, at) + section + (next >= 0 ? doc.slice(next + 1) : '');
  }
  const before = doc.indexOf('\n## Targets: stage on each filesystem');
  return before >= 0 ? `${doc.slice(0, before + 1)}${section}\n${doc.slice(before + 1)}` : `${doc}\n${section}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { targetsTable } = await import('./report.mjs');
  const why = registryPullMissing();
  const res = why ? { why } : await measureRegistryPull({ log: (m) => console.error(m) });
  console.log(registrySection(res, targetsTable, `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC.`));
}
