// npm run test:boot: boots a real Linux kernel under QEMU (TCG) many times over one disk
// image with stagedroot installed as the README says, and checks three scenarios. Prints
// one line per scenario and closes with "N passed, N failed". Needs root, qemu-system-x86,
// busybox-static, cpio, debootstrap, e2fsprogs and linux-image-cloud-amd64.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { buildImage } from './image.mjs';
import { SCENARIOS } from './scenarios.mjs';

const cache = process.env.STAGEDROOT_TEST_CACHE ?? '/var/cache/stagedroot-test';
const out = process.env.STAGEDROOT_BOOT_OUT ?? fs.mkdtempSync('/var/tmp/stagedroot-boot-');
fs.mkdirSync(out, { recursive: true });
const log = (m) => process.stderr.write(`real-boot: ${m}\n`);
const only = process.env.STAGEDROOT_BOOT_ONLY ? Number(process.env.STAGEDROOT_BOOT_ONLY) : null;

if (process.getuid?.() !== 0) {
  console.error('real-boot: needs root (debootstrap, chroot, mkfs.ext4 -d)');
  console.log('real-boot: 0 passed, 1 failed');
  process.exit(1);
}

const started = Date.now();
log(`output in ${out}`);
let machine;
try {
  machine = buildImage({ cache, work: out, log });
} catch (err) {
  console.error(`real-boot: cannot build the image: ${err.stderr?.toString() || err.message}`);
  console.log('real-boot: 0 passed, 1 failed');
  process.exit(1);
}
let bootCount = 0;
const env = { machine, out, log, nextBoot: () => ++bootCount };
let passed = 0;
let failed = 0;
for (const [i, scenario] of SCENARIOS.entries()) {
  if (only !== null && only !== i + 1) continue;
  const t = Date.now();
  let s;
  try {
    s = await scenario(env);
  } catch (err) {
    s = { name: scenario.name, failures: [`threw: ${err.stack}`], boots: [] };
  }
  const secs = ((Date.now() - t) / 1000).toFixed(0);
  const ok = s.failures.length === 0;
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok' : 'FAIL'} ${i + 1} - ${s.name} (${s.boots.length} boots, ${secs}s)`);
  for (const f of s.failures) console.log(`    ${f}`);
  fs.writeFileSync(path.join(out, `scenario-${i + 1}.json`), JSON.stringify({ name: s.name, failures: s.failures, boots: s.boots }, null, 2));
}
log(`${bootCount} boots in ${((Date.now() - started) / 1000).toFixed(0)}s; console logs in ${out}`);
if (failed === 0) fs.rmSync(machine.img, { force: true });
console.log(`real-boot: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
