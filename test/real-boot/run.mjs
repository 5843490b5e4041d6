// npm run test:boot: boots Debian machines under QEMU (TCG) from their disks, through
// their firmware and bootloader, many times, and checks the scenarios: a plain Debian
// machine put under stagedroot as docs/install.md says, then updates, rollbacks and
// crashes on it. Prints one line per scenario and closes with "N passed, N failed".
// Needs root and the host tools of scripts/test-setup.sh (qemu-system-x86, ovmf,
// debootstrap, fdisk, dosfstools, e2fsprogs).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildMachine, buildPackageDisk, pack, userspace } from './image.mjs';
import { SCENARIOS } from './scenarios.mjs';

const cache = process.env.STAGEDROOT_TEST_CACHE ?? '/var/cache/stagedroot-test';
const out = process.env.STAGEDROOT_BOOT_OUT ?? fs.mkdtempSync('/var/tmp/stagedroot-boot-');
fs.mkdirSync(out, { recursive: true });
const log = (m) => process.stderr.write(`real-boot: ${m}\n`);
// STAGEDROOT_BOOT_ONLY=N runs scenarios 1..N (each continues on the machine the last left).
const upTo = process.env.STAGEDROOT_BOOT_ONLY ? Number(process.env.STAGEDROOT_BOOT_ONLY) : Infinity;

if (process.getuid?.() !== 0) {
  console.error('real-boot: needs root (debootstrap, chroot, losetup, mount)');
  console.log('real-boot: 0 passed, 1 failed');
  process.exit(1);
}

const started = Date.now();
log(`output in ${out}`);
let env;
try {
  const us = userspace({ cache, log });
  const tarball = pack(out);
  const packages = buildPackageDisk({ us, work: out });
  const bios = { ...buildMachine({ firmware: 'bios', us, work: out, tarball, log }), packages };
  let bootCount = 0;
  env = { us, tarball, packages, machine: bios, out, log, nextBoot: () => ++bootCount, boots: () => bootCount };
} catch (err) {
  console.error(`real-boot: cannot build the machines: ${err.stderr?.toString() || err.message}`);
  console.log('real-boot: 0 passed, 1 failed');
  process.exit(1);
}
log(`machines built (${((Date.now() - started) / 1000).toFixed(0)}s)`);
let passed = 0;
let failed = 0;
for (const [i, scenario] of SCENARIOS.entries()) {
  if (i + 1 > upTo) break;
  const t = Date.now();
  let s;
  try {
    s = await scenario(env);
  } catch (err) {
    s = { name: scenario.name, failures: [`threw: ${err.stderr?.toString() ?? ''}${err.stack}`], boots: [] };
  }
  const secs = ((Date.now() - t) / 1000).toFixed(0);
  const ok = s.failures.length === 0;
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok' : 'FAIL'} ${i + 1} - ${s.name} (${s.boots.length} boots, ${secs}s)`);
  for (const n of s.notes ?? []) console.log(`    note: ${n}`);
  for (const b of s.boots) if (b.unitTimes) console.log(`    ${b.label}: stagedroot-boot.service / stagedroot-health.service: ${b.unitTimes}`);
  for (const f of s.failures) console.log(`    ${f}`);
  fs.writeFileSync(path.join(out, `scenario-${i + 1}.json`), JSON.stringify({ name: s.name, failures: s.failures, boots: s.boots }, null, 2));
}
log(`${env.boots()} boots in ${((Date.now() - started) / 1000).toFixed(0)}s; console logs in ${out}`);
if (failed === 0) for (const f of fs.readdirSync(out)) if (f.endsWith('.img') || f.endsWith('.fd')) fs.rmSync(path.join(out, f), { force: true });
console.log(`real-boot: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
