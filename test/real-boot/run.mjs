// npm run test:boot: boots Debian machines under QEMU (TCG) from their disks, through
// their firmware and bootloader, many times, and checks the scenarios: a plain Debian
// machine put under stagedroot as docs/install.md says, then updates, rollbacks and
// crashes on it. Prints one line per scenario and closes with "N passed, N failed".
// Needs root and the host tools of scripts/test-setup.sh (qemu-system-x86, ovmf,
// debootstrap, fdisk, dosfstools, e2fsprogs).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { buildMachine, buildPackageDisk, kernelIn, pack, userspace } from './image.mjs';
import { SCENARIOS } from './scenarios.mjs';
import { liveApplyOnUefi } from './live.mjs';
import { uefiSystemdBoot } from './uefi.mjs';

/** The scenarios on the UEFI machine, in order (the others continue on the GRUB machine). */
const UEFI_CHAIN = new Set([uefiSystemdBoot, liveApplyOnUefi]);

const cache = process.env.STAGEDROOT_TEST_CACHE ?? '/var/cache/stagedroot-test';
const out = process.env.STAGEDROOT_BOOT_OUT ?? fs.mkdtempSync('/var/tmp/stagedroot-boot-');
fs.mkdirSync(out, { recursive: true });
const log = (m) => process.stderr.write(`real-boot: ${m}\n`);
// STAGEDROOT_BOOT_SCENARIOS=1,2,5 runs those scenarios only, in order (each continues on
// the machine the one before left); STAGEDROOT_BOOT_ONLY=N runs 1..N. The ones left out are
// said on stderr and on stdout ("NOT RUN"), with STAGEDROOT_BOOT_NOT_RUN_WHY as the reason.
function selection() {
  const all = SCENARIOS.map((_, i) => i + 1);
  if (process.env.STAGEDROOT_BOOT_SCENARIOS) {
    const want = process.env.STAGEDROOT_BOOT_SCENARIOS.split(',').map((n) => Number(n.trim()));
    const bad = want.filter((n) => !all.includes(n));
    if (bad.length) throw new Error(`STAGEDROOT_BOOT_SCENARIOS names no scenario ${bad.join(', ')} (there are ${all.length})`);
    return new Set(want);
  }
  const upTo = process.env.STAGEDROOT_BOOT_ONLY ? Number(process.env.STAGEDROOT_BOOT_ONLY) : Infinity;
  return new Set(all.filter((n) => n <= upTo));
}
const selected = selection();
const notRun = SCENARIOS.map((_, i) => i + 1).filter((n) => !selected.has(n));
const notRunLine = notRun.length ? `real-boot: scenarios ${notRun.join(', ')} NOT RUN: ${process.env.STAGEDROOT_BOOT_NOT_RUN_WHY ?? 'left out by STAGEDROOT_BOOT_SCENARIOS / STAGEDROOT_BOOT_ONLY'}` : null;
if (notRunLine) console.error(notRunLine);

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
  // STAGEDROOT_BOOT_RESUME=IMG (a developer's shortcut): the GRUB machine is a copy of IMG,
  // an image kept by STAGEDROOT_BOOT_SNAPSHOTS=1 after an earlier scenario, instead of a new one.
  const resume = process.env.STAGEDROOT_BOOT_RESUME;
  // No GRUB machine when only the UEFI machine's scenarios run.
  const grubChain = SCENARIOS.some((sc, i) => selected.has(i + 1) && !UEFI_CHAIN.has(sc));
  const built = !grubChain ? null : resume ? resumeMachine(resume, out, us, log) : buildMachine({ firmware: 'bios', us, work: out, tarball, log });
  const bios = built && { ...built, packages };
  let bootCount = 0;
  env = { us, tarball, packages, machine: bios, out, log, nextBoot: () => ++bootCount, boots: () => bootCount };
} catch (err) {
  console.error(`real-boot: cannot build the machines: ${err.stderr?.toString() || err.message}`);
  console.log('real-boot: 0 passed, 1 failed');
  process.exit(1);
}
log(`machines built (${((Date.now() - started) / 1000).toFixed(0)}s)`);
/** The GRUB machine as a copy of a kept image (its kernel: the userspace's cloud kernel). */
function resumeMachine(from, work, us, log) {
  const img = path.join(work, 'bios.img');
  execFileSync('cp', ['--sparse=always', from, img]);
  log(`bios machine resumed from ${from}`);
  return { firmware: 'bios', img, vars: null, kernel: kernelIn(path.join(us, 'root'), 'cloud-amd64') };
}

let passed = 0;
let failed = 0;
// STAGEDROOT_BOOT_PARALLEL=1: the UEFI machine's scenarios run, in order, beside the GRUB
// machine's chain instead of after it: two single-CPU guests on two cores.
const parallel = process.env.STAGEDROOT_BOOT_PARALLEL === '1';
const chosen = [...SCENARIOS.entries()].filter(([i]) => selected.has(i + 1));
const beside = parallel
  ? (async () => {
      for (const [i, sc] of chosen) if (UEFI_CHAIN.has(sc)) await runScenario(i, sc);
    })()
  : null;
for (const [i, sc] of chosen) if (!(parallel && UEFI_CHAIN.has(sc))) await runScenario(i, sc);
await beside;

async function runScenario(i, scenario) {
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
  for (const b of s.boots) {
    if (b.unitTimes) console.log(`    ${b.label}: stagedroot-boot.service / stagedroot-health.service: ${b.unitTimes}`);
    if (b.blame) console.log(`    ${b.label}: systemd-analyze blame: ${b.blame}; ${b.analyzeTime}`);
  }
  for (const f of s.failures) console.log(`    ${f}`);
  if (ok && process.env.STAGEDROOT_BOOT_SNAPSHOTS === '1' && !UEFI_CHAIN.has(scenario)) {
    const keep = path.join(out, `after-scenario-${i + 1}.bios.img.keep`);
    execFileSync('cp', ['--sparse=always', env.machine.img, keep]);
    log(`machine after scenario ${i + 1} kept: ${keep} (STAGEDROOT_BOOT_RESUME=${keep} starts from it)`);
  }
  fs.writeFileSync(path.join(out, `scenario-${i + 1}.json`), JSON.stringify({ name: s.name, failures: s.failures, boots: s.boots, figures: s.figures }, null, 2));
}
log(`${env.boots()} boots in ${((Date.now() - started) / 1000).toFixed(0)}s; console logs in ${out}`);
if (failed === 0) for (const f of fs.readdirSync(out)) if (f.endsWith('.img') || f.endsWith('.fd')) fs.rmSync(path.join(out, f), { force: true });
if (notRunLine) {
  console.error(notRunLine);
  console.log(notRunLine);
}
console.log(`real-boot: ${passed} passed, ${failed} failed${notRun.length ? `, ${notRun.length} NOT RUN` : ''}`);
process.exit(failed === 0 ? 0 : 1);
