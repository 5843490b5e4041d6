/**
 * The registry pull's rows in one run (not yet in `npm run bench`), against Debian's
 * docker-registry on loopback (plain http) with images pushed by skopeo:
 *
 * - a first pull's throughput against `skopeo copy docker://… oci:DIR` of the same image
 *   (a base layer of BENCH_PULL_MB MiB of random bytes and a small one), interleaved,
 *   medians of BENCH_REPS (default 5); stagedroot's pull runs in this process (dist/), so
 *   its time has no process start, skopeo's has: target ≥ 0.8 × skopeo's throughput;
 * - an update that shares the base layer: the bytes its pull fetches (the config and the
 *   new layer; the manifest is not counted by either side) against that layer's and the
 *   config's bytes: target ≤ 1.05.
 *
 *   node scripts/bench/registry-pull.mjs      (after npm run build)
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { run } from './tools.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { pullImage } = await import(path.join(repo, 'dist/sources/registry/pull.js'));
const { parseDockerReference } = await import(path.join(repo, 'dist/sources/registry/reference.js'));
const reps = Number(process.env.BENCH_REPS ?? 5);
const mib = Number(process.env.BENCH_PULL_MB ?? 48);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const port = await new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-bench-pull-'));
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

  const ours = [];
  const theirs = [];
  for (let i = 0; i < reps; i++) {
    const a = path.join(dir, `ours-${i}`);
    const b = path.join(dir, `skopeo-${i}`);
    let t0 = performance.now();
    await pullImage(ref('base'), a, opts);
    ours.push(performance.now() - t0);
    t0 = performance.now();
    run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--src-tls-verify=false', `docker://${host}/bench/os:base`, `oci:${b}:base`]);
    theirs.push(performance.now() - t0);
    fs.rmSync(a, { recursive: true, force: true });
    fs.rmSync(b, { recursive: true, force: true });
  }
  const throughput = median(theirs) / median(ours);

  const blobs = path.join(dir, 'update');
  await pullImage(ref('base'), blobs, opts);
  let fetched = 0;
  const r = await pullImage(ref('v2'), blobs, { ...opts, onBlob: (e) => (fetched += e.fetched) });
  const m = JSON.parse(fs.readFileSync(path.join(blobs, 'blobs', ...r.digest.split(':'))));
  const newBytes = m.config.size + m.layers.at(-1).size;
  const update = fetched / newBytes;

  console.log(`first pull of ${mib} MiB, medians of ${reps}: stagedroot ${median(ours).toFixed(0)} ms, skopeo copy ${median(theirs).toFixed(0)} ms: throughput ${throughput.toFixed(2)} x skopeo's (target >= 0.8) ${throughput >= 0.8 ? 'met' : 'NOT met'}`);
  console.log(`update sharing the base layer: fetched ${fetched} bytes for a new layer and config of ${newBytes}: ${update.toFixed(3)} x (target <= 1.05) ${update <= 1.05 ? 'met' : 'NOT met'}`);
} finally {
  registry.kill('SIGTERM');
  fs.rmSync(dir, { recursive: true, force: true });
}
