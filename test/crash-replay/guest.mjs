// The crash-replay guest: Debian's cloud kernel under QEMU (TCG) with a busybox initramfs
// that mounts a Debian userspace (dmsetup, e2fsprogs, xfsprogs, the kernel's modules, node
// and the packed stagedroot package, installed as a user installs it) and runs one script
// as its init. The script the guest runs comes on its own disk; what it reports ("@key
// value" lines) comes back on the second serial port, as in the real-boot test.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runQemu } from '../vm/qemu.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '../..');
const BOOT_TIMEOUT_MS = Number(process.env.STAGEDROOT_BOOT_TIMEOUT ?? 900) * 1000;

function run(cmd, args, o = {}) {
  return (execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20, ...o }) ?? '').toString();
}

/** The newest Debian cloud kernel installed on this machine (linux-image-cloud-amd64), and its modules. */
function findKernel() {
  const versions = fs.readdirSync('/usr/lib/modules').filter((v) => v.endsWith('-cloud-amd64') && fs.existsSync(`/boot/vmlinuz-${v}`));
  versions.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const v = versions.at(-1);
  if (!v) throw new Error('no linux-image-cloud-amd64 kernel in /boot (apt-get install linux-image-cloud-amd64)');
  return { version: v, vmlinuz: `/boot/vmlinuz-${v}` };
}

/** PID 1 of the guest: mounts the API filesystems, runs the step script, powers off. */
const GUEST_INIT = `#!/bin/sh
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
tr -d '\\000' </dev/vdb >/run/step.sh
sh /run/step.sh >/dev/ttyS1 2>&1
echo "@exit $?" >/dev/ttyS1
sync
echo o >/proc/sysrq-trigger
sleep 60
`;

/** /init of the initramfs: the virtio modules, the root disk, switch_root to the guest's init. */
const INITRAMFS_INIT = `#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/lib/modules/$m.ko" || echo "initramfs: cannot load $m" >/dev/console; done </lib/modules/order
i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
mkdir -p /newroot
mount -t ext4 -o rw /dev/vda /newroot || { echo "initramfs: cannot mount /dev/vda" >/dev/console; poweroff -f; }
umount /proc /sys
umount /dev 2>/dev/null || umount -l /dev
exec switch_root /newroot /replay-init
`;

function makeInitramfs(kver, out) {
  const work = fs.mkdtempSync('/var/tmp/stagedroot-replay-initramfs-');
  try {
    for (const d of ['bin', 'dev', 'proc', 'sys', 'lib/modules', 'newroot']) fs.mkdirSync(path.join(work, d), { recursive: true });
    fs.copyFileSync('/bin/busybox', path.join(work, 'bin/busybox'));
    fs.chmodSync(path.join(work, 'bin/busybox'), 0o755);
    for (const applet of run('/bin/busybox', ['--list']).split('\n').filter(Boolean)) {
      if (!fs.existsSync(path.join(work, 'bin', applet))) fs.symlinkSync('busybox', path.join(work, 'bin', applet));
    }
    const order = [];
    for (const m of ['virtio_ring', 'virtio', 'virtio_pci_modern_dev', 'virtio_pci_legacy_dev', 'virtio_pci', 'virtio_blk']) {
      const f = run('find', [`/usr/lib/modules/${kver}/kernel`, '-name', `${m}.ko`]).split('\n')[0];
      if (!f) throw new Error(`no ${m}.ko for kernel ${kver}`);
      fs.copyFileSync(f, path.join(work, 'lib/modules', `${m}.ko`));
      order.push(m);
    }
    fs.writeFileSync(path.join(work, 'lib/modules/order'), `${order.join('\n')}\n`);
    fs.writeFileSync(path.join(work, 'init'), INITRAMFS_INIT, { mode: 0o755 });
    run('sh', ['-c', `cd "${work}" && find . | cpio -o -H newc --quiet | gzip -1 >"${out}"`]);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Builds the guest's root disk and initramfs in `work` (the Debian userspace is built once
 * under `cache`). Returns what `boot` needs.
 */
export function buildGuest({ cache, work, log }) {
  const t0 = Date.now();
  run('sh', [path.join(HERE, 'build-userspace.sh'), cache], { stdio: ['ignore', 'inherit', 'inherit'] });
  const kernel = findKernel();
  const root = path.join(work, 'root');
  run('cp', ['-a', '--reflink=auto', path.join(cache, 'replay-userspace'), root]);
  fs.rmSync(path.join(root, '.complete'));
  fs.copyFileSync(process.execPath, path.join(root, 'usr/bin/node'));
  fs.chmodSync(path.join(root, 'usr/bin/node'), 0o755);
  const packDir = path.join(work, 'pack');
  fs.mkdirSync(packDir);
  const tarball = path.join(packDir, run('npm', ['pack', '--silent', '--pack-destination', packDir], { cwd: REPO }).trim().split('\n').at(-1));
  run('npm', ['install', '-g', '--prefix', path.join(root, 'usr/local'), '--no-audit', '--no-fund', '--omit=dev', tarball]);
  // The kernel's modules (dm-mod, dm-log-writes, xfs and what they load), for modprobe.
  fs.mkdirSync(path.join(root, 'usr/lib/modules'), { recursive: true });
  run('cp', ['-a', `/usr/lib/modules/${kernel.version}`, path.join(root, 'usr/lib/modules', kernel.version)]);
  fs.writeFileSync(path.join(root, 'replay-init'), GUEST_INIT, { mode: 0o755 });
  const img = path.join(work, 'root.img');
  run('mkfs.ext4', ['-q', '-F', '-L', 'replay-root', '-d', root, img, '2G']);
  fs.rmSync(root, { recursive: true, force: true });
  const initrd = path.join(work, 'initrd.img');
  makeInitramfs(kernel.version, initrd);
  log(`guest built (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
  return { img, initrd, kernel };
}

/**
 * Boots the guest once with the step script as /dev/vdb and `disks` (raw images, written)
 * as /dev/vdc, /dev/vdd, ... The root disk is a snapshot: the guest's own writes to it are
 * dropped. Resolves with the reported results, how the run ended and how long it took.
 */
export function boot({ guest, logBase, step, disks }) {
  return runQemu({
    logBase,
    step,
    timeoutMs: BOOT_TIMEOUT_MS,
    args: (stepFile) => [
      '-kernel', guest.kernel.vmlinuz, '-initrd', guest.initrd,
      '-append', 'console=ttyS0 root=/dev/vda rw panic=-1 no_timer_check',
      '-drive', `file=${guest.img},format=raw,if=virtio,snapshot=on`,
      '-drive', `file=${stepFile},format=raw,if=virtio,readonly=on`,
      // cache=unsafe: the host skips the guest's flushes (the log records them all the same).
      ...disks.flatMap((d) => ['-drive', `file=${d},format=raw,if=virtio,cache=unsafe`]),
    ],
  });
}

