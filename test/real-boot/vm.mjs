// One boot of a test machine from its disk, through its firmware and bootloader: a fresh
// qemu run (TCG; -no-reboot turns the guest's reboot, a kernel panic included, into an
// exit). SeaBIOS for the bios machine, OVMF with the machine's own NVRAM for the uefi
// one. The console goes to LOG.console.log; what the boot's step script reports goes to
// a second serial port, LOG.results.log. Disks: vda the machine, vdb the step script,
// vdc the package disk (when given).
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';

// A boot's limit: the kernel update's stage boot (apt, two initramfs builds, the tree's
// copy under TCG) took 830 s of a guest at load 10.
const BOOT_TIMEOUT_MS = Number(process.env.STAGEDROOT_BOOT_TIMEOUT ?? 1500) * 1000;

/** The step script on /dev/vdb, padded to whole sectors (the guest strips the NULs). */
function stepDisk(file, script) {
  const body = Buffer.from(`set -u\nexport PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n${script}\n`);
  const size = Math.ceil((body.length + 1) / 4096) * 4096;
  const buf = Buffer.alloc(size);
  body.copy(buf);
  fs.writeFileSync(file, buf);
}

/**
 * Boots once. `killOn`: a result key; when the step reports it, qemu is SIGKILLed (a
 * power cut). Resolves with the reported results (key -> value, in order), how the run
 * ended and how long it took.
 */
export function boot({ firmware, img, vars, packages = null, logBase, step, killOn = null }) {
  const stepFile = `${logBase}.step.sh`;
  stepDisk(stepFile, step);
  const consoleLog = `${logBase}.console.log`;
  const resultsLog = `${logBase}.results.log`;
  fs.writeFileSync(resultsLog, '');
  const args = [
    '-accel', 'tcg', '-m', '1024', '-smp', '1', '-no-reboot', '-nodefaults',
    '-display', 'none', '-monitor', 'none',
    '-serial', `file:${consoleLog}`, '-serial', `file:${resultsLog}`,
    ...(firmware === 'uefi'
      ? ['-drive', 'if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd', '-drive', `if=pflash,format=raw,file=${vars}`]
      : []),
    '-drive', `file=${img},format=raw,if=virtio`,
    '-drive', `file=${stepFile},format=raw,if=virtio,readonly=on`,
    ...(packages ? ['-drive', `file=${packages},format=raw,if=virtio,readonly=on`] : []),
  ];
  const started = Date.now();
  return new Promise((resolve) => {
    const q = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    q.stderr.on('data', (c) => (stderr += c));
    let ended = null;
    const timer = setTimeout(() => {
      ended = 'timeout';
      q.kill('SIGKILL');
    }, BOOT_TIMEOUT_MS);
    const poll = killOn
      ? setInterval(() => {
          if (ended === null && parseResults(resultsLog).has(killOn)) {
            ended = 'power-cut';
            q.kill('SIGKILL');
          }
        }, 50)
      : null;
    q.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (poll) clearInterval(poll);
      resolve({
        ended: ended ?? (code === 0 ? 'exited' : `qemu failed (${signal ?? code}): ${stderr.trim()}`),
        seconds: (Date.now() - started) / 1000,
        results: parseResults(resultsLog),
        consoleLog,
      });
    });
  });
}

/** Lines "@key value" from the step's serial port. */
export function parseResults(file) {
  const m = new Map();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const r = /^@([\w.-]+) ?(.*)$/.exec(line.replace(/\r$/, ''));
    if (r) m.set(r[1], r[2]);
  }
  return m;
}

/** Seconds from the kernel's start to a console line matching `re` (its printk timestamp), or null. */
export function consoleTime(file, re) {
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const t = /^\[\s*(\d+\.\d+)\]/.exec(line);
    if (t && re.test(line)) return Number(t[1]);
  }
  return null;
}
