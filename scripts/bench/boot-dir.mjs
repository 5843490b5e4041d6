/**
 * The boot-directory row: `Sysroot.open()` (a writer's open: recovery, which
 * syncs the boot entries) + `status()`, in process, on two sysroots that differ only
 * in `--boot-dir` (two deployments, each shipping a kernel of 12 MB and an initramfs of
 * 48 MB, as Debian's are), interleaved. Before the kernel-hash cache every such open
 * read both images of every deployment; before the record of the last check
 * (boot-entries.json) each looked up every kernel and read the entries back.
 */
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Sysroot } from '../../dist/index.js';
import { median } from './report.mjs';
import { run } from './tools.mjs';

export async function measureBootDir(o) {
  const { dir, log } = o;
  const rounds = o.rounds ?? 41;
  const tree = path.join(dir, 'tree');
  const modules = path.join(tree, 'usr/lib/modules/6.1.0-bench');
  fs.mkdirSync(modules, { recursive: true });
  fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=bench\n');
  fs.writeFileSync(path.join(modules, 'vmlinuz'), randomBytes(12 << 20));
  fs.writeFileSync(path.join(modules, 'initramfs.img'), randomBytes(48 << 20));
  const boot = path.join(dir, 'boot');
  fs.mkdirSync(boot);
  const withBoot = path.join(dir, 'with-boot-dir');
  const without = path.join(dir, 'without');
  for (const [p, extra] of [[withBoot, { bootDir: boot }], [without, {}]]) {
    await Sysroot.init(p, { fromDirectory: tree, label: 'base', ...extra });
    const s = await Sysroot.open(p);
    await s.stage({ version: 1, label: 'two', files: [{ path: '/etc/motd', contents: 'hi\n' }] });
    await s.finalize();
  }
  // As on a machine, where the entries were written at the last transition, seconds to
  // days before: an open records what its check of the entries read only once every
  // stamp it saw is older than 3 s (src/boot/entries/record.ts); the warm-up open
  // below makes that record, the measured ones use it.
  await new Promise((r) => setTimeout(r, 3100));
  // Wall and CPU (user + sys of the process, µs from getrusage: the open runs on this thread) of each open + status.
  const samples = { 'open + status, --boot-dir': [], 'open + status': [], 'cpu: open + status, --boot-dir': [], 'cpu: open + status': [] };
  const once = async (p, k) => {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    (await Sysroot.open(p)).status();
    const ms = performance.now() - t0;
    const c = process.cpuUsage(c0);
    samples[k].push(ms);
    samples[`cpu: ${k}`].push((c.user + c.system) / 1000);
  };
  await once(withBoot, 'open + status, --boot-dir');
  await once(without, 'open + status');
  for (const k of Object.keys(samples)) samples[k].length = 0;
  for (let r = 0; r < rounds; r++) {
    await once(withBoot, 'open + status, --boot-dir');
    await once(without, 'open + status');
  }
  const m = (k) => median(samples[k]).toFixed(2);
  log(`  open + status: ${m('open + status, --boot-dir')} ms with --boot-dir, ${m('open + status')} ms without; CPU ${m('cpu: open + status, --boot-dir')} and ${m('cpu: open + status')} ms (medians of ${rounds})`);
  run('rm', ['-rf', dir]);
  return samples;
}
