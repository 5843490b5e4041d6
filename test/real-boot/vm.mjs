// One boot of a test machine from its disk, through its firmware and bootloader: a fresh
// qemu run (TCG; -no-reboot turns the guest's reboot, a kernel panic included, into an
// exit). SeaBIOS for the bios machine, OVMF with the machine's own NVRAM for the uefi
// one. The console goes to LOG.console.log; what the boot's step script reports goes to
// a second serial port, LOG.results.log. Disks: vda the machine, vdb the step script,
// vdc the package disk (when given).
import * as fs from 'node:fs';
import { runQemu } from '../vm/qemu.mjs';

// A boot's limit: the kernel update's stage boot (apt, two initramfs builds, the tree's
// copy under TCG) took 830 s of a guest at load 10.
const BOOT_TIMEOUT_MS = Number(process.env.STAGEDROOT_BOOT_TIMEOUT ?? 1500) * 1000;

/**
 * Boots once. `killOn`: a result key; when the step reports it, qemu is SIGKILLed (a
 * power cut). Resolves with the reported results (key -> value, in order), how the run
 * ended and how long it took.
 */
export function boot({ firmware, img, vars, packages = null, logBase, step, killOn = null }) {
  return runQemu({
    logBase,
    killOn,
    timeoutMs: BOOT_TIMEOUT_MS,
    step: `set -u\nexport PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n${step}`,
    args: (stepFile) => [
      ...(firmware === 'uefi'
        ? ['-drive', 'if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd', '-drive', `if=pflash,format=raw,file=${vars}`]
        : []),
      '-drive', `file=${img},format=raw,if=virtio`,
      '-drive', `file=${stepFile},format=raw,if=virtio,readonly=on`,
      ...(packages ? ['-drive', `file=${packages},format=raw,if=virtio,readonly=on`] : []),
    ],
  });
}

/** Seconds from the kernel's start to a console line matching `re` (its printk timestamp), or null. */
export function consoleTime(file, re) {
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const t = /^\[\s*(\d+\.\d+)\]/.exec(line);
    if (t && re.test(line)) return Number(t[1]);
  }
  return null;
}
