// Builds the real-boot test's machines the way a Debian machine is installed: a
// partitioned disk, a bookworm userspace with Debian's cloud kernel and an
// initramfs-tools initramfs, the bootloader installed onto the disk by its own tools, a
// Node.js in /usr/local (Debian's is 18; stagedroot needs 20) and stagedroot installed
// with `npm install -g` of the packed package. Nothing of stagedroot is set up here
// beyond the install: the guest does that itself, as docs/install.md tells a user.
//
//   bios: GPT disk, a 1 MiB bios_grub partition for grub-pc's core image and an ext4
//         root; SeaBIOS boots Debian's GRUB (grub-install --target=i386-pc, update-grub).
//   uefi: GPT disk, a FAT ESP mounted at /boot/efi and an ext4 root; OVMF boots
//         systemd-boot (bootctl install, kernel-install's entries on the ESP).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '../..');
const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

function run(cmd, args, o = {}) {
  return (execFileSync(cmd, args, { stdio: [o.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], maxBuffer: 64 << 20, ...o }) ?? '').toString();
}

/**
 * Runs a command inside the mounted machine (chroot), as its admin would. The ESP is a
 * tmpfs there while the machine is built (this host's kernel may lack vfat):
 * SYSTEMD_RELAX_ESP_CHECKS and BOOT_ROOT let bootctl and kernel-install write into it, and
 * withEsp copies it onto the FAT partition with mtools.
 */
export function inMachine(root, cmd, args, o = {}) {
  return run('chroot', [root, cmd, ...args], { env: { PATH: GUEST_PATH, LANG: 'C.UTF-8', DEBIAN_FRONTEND: 'noninteractive', HOME: '/root', SYSTEMD_RELAX_ESP_CHECKS: '1', BOOT_ROOT: '/boot/efi' }, ...o });
}

/**
 * Runs `fn()` with the ESP's files in `<root>/boot/efi`, a tmpfs mounted there for the
 * time (its own filesystem, as bootctl and kernel-install want the ESP to be), then
 * writes them back onto the FAT partition `part` with mcopy.
 */
export function withEsp(part, root, fn) {
  const dir = path.join(root, 'boot/efi');
  fs.mkdirSync(dir, { recursive: true });
  run('mount', ['-t', 'tmpfs', '-o', 'mode=0700', 'tmpfs', dir]);
  try {
    if (run('mdir', ['-b', '-i', part, '::/']).trim() !== '') run('sh', ['-c', 'mcopy -s -n -i "$1" "::/*" "$2/"', 'sh', part, dir]);
    const r = fn();
    run('sh', ['-c', 'mcopy -s -o -i "$1" "$2"/* ::/', 'sh', part, dir]);
    return r;
  } finally {
    run('umount', [dir]);
  }
}

/** The cached userspace (debootstrap + later package sets): `<cache>/userspace-<hash of its recipe>`. */
export function userspace({ cache, log }) {
  const recipe = fs.readFileSync(path.join(HERE, 'build-userspace.sh'));
  const dir = path.join(cache, `userspace-${createHash('sha256').update(recipe).digest('hex').slice(0, 12)}`);
  const t0 = Date.now();
  fs.mkdirSync(cache, { recursive: true });
  run('sh', [path.join(HERE, 'build-userspace.sh'), dir], { stdio: ['ignore', 'inherit', 'inherit'] });
  log(`userspace ${dir} ready (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
  return dir;
}

/** The one kernel version a tree's /boot holds for a flavour (`cloud-amd64`, `amd64`). */
export function kernelIn(root, flavour) {
  const v = fs
    .readdirSync(path.join(root, 'boot'))
    .filter((f) => f.startsWith('vmlinuz-'))
    .map((f) => f.slice('vmlinuz-'.length))
    .filter((k) => k.endsWith(`-${flavour}`) && !k.slice(0, -flavour.length - 1).endsWith('-cloud'));
  if (v.length !== 1) throw new Error(`expected one ${flavour} kernel in ${root}/boot, found ${JSON.stringify(v)}`);
  return v[0];
}

/** The version of the kernel the linux-image-amd64 package set installs (its linux-image-V deb). */
export function kernel2Version(us) {
  const debs = fs.readdirSync(path.join(us, 'debs/kernel2'));
  const m = debs.map((d) => /^linux-image-(\d[^_]*-amd64)_/.exec(d)).find(Boolean);
  if (!m) throw new Error(`no linux-image-VERSION-amd64 deb in ${us}/debs/kernel2: ${debs.join(' ')}`);
  return m[1];
}

/** Everything mounted or attached while a disk is worked on, undone in reverse order. */
class Attachments {
  constructor() {
    this.undo = [];
  }
  loop(img) {
    const dev = run('losetup', ['-P', '-f', '--show', img]).trim();
    this.undo.push(() => run('losetup', ['-d', dev]));
    // Some kernels leave the scan to userspace (partx adds what the table says).
    if (!fs.existsSync(`${dev}p1`)) run('partx', ['-a', dev]);
    for (let i = 0; i < 50 && !fs.existsSync(`${dev}p2`); i++) run('sleep', ['0.1']);
    if (!fs.existsSync(`${dev}p2`)) throw new Error(`no partitions on ${dev} after losetup -P`);
    return dev;
  }
  mount(args, dir) {
    fs.mkdirSync(dir, { recursive: true });
    run('mount', [...args, dir]);
    this.undo.push(() => run('umount', [dir]));
  }
  /**
   * /dev, /proc and /sys in a root for grub-install, update-grub, bootctl and
   * update-initramfs. /dev is the root's own tmpfs with the disk's nodes and the udev
   * links an installer's /dev has (update-grub writes root=UUID= only when
   * /dev/disk/by-uuid/UUID exists; this host's /dev has no udev).
   */
  api(root, disk) {
    const dev = path.join(root, 'dev');
    this.mount(['-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs'], dev);
    for (const [name, major, minor] of [['null', 1, 3], ['zero', 1, 5], ['full', 1, 7], ['random', 1, 8], ['urandom', 1, 9]]) {
      run('mknod', ['-m', '0666', path.join(dev, name), 'c', String(major), String(minor)]);
    }
    fs.mkdirSync(path.join(dev, 'disk/by-uuid'), { recursive: true });
    fs.mkdirSync(path.join(dev, 'disk/by-label'), { recursive: true });
    for (const node of [disk, `${disk}p1`, `${disk}p2`]) {
      const name = path.basename(node);
      const [major, minor] = fs.readFileSync(`/sys/class/block/${name}/dev`, 'utf8').trim().split(':');
      run('mknod', ['-m', '0660', path.join(dev, name), 'b', major, minor]);
      if (node === disk) continue;
      for (const [key, dir] of [['UUID', 'by-uuid'], ['LABEL', 'by-label']]) {
        let value = '';
        try {
          value = run('blkid', ['-s', key, '-o', 'value', node]).trim();
        } catch {
          // No filesystem (bios_grub) or no label: blkid exits 2.
        }
        if (value) fs.symlinkSync(`../../${name}`, path.join(dev, 'disk', dir, value));
      }
    }
    this.mount(['-t', 'proc', 'proc'], path.join(root, 'proc'));
    this.mount(['-t', 'sysfs', 'sysfs'], path.join(root, 'sys'));
  }
  release() {
    let first = null;
    for (const f of this.undo.reverse()) {
      try {
        f();
      } catch (err) {
        first ??= err;
      }
    }
    this.undo = [];
    if (first) throw first;
  }
}

/** Runs `fn(attachments)` with the disk's partitions attached; everything is undone after. */
export function withDisk(img, fn) {
  const a = new Attachments();
  try {
    return fn(a, a.loop(img));
  } finally {
    a.release();
  }
}

const GPT = {
  bios: 'label: gpt\nsize=1MiB, type=21686148-6449-6E6F-744E-656564454649, name=bios_grub\ntype=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root\n',
  uefi: 'label: gpt\nsize=256MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp\ntype=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root\n',
};

/** The serial console, no menu delay: what an admin of a headless VM sets in /etc/default/grub. */
const GRUB_DEFAULTS = `
# real-boot test machine: serial console, kernel messages on it, no menu delay.
GRUB_TIMEOUT=0
GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0,115200 panic=-1 no_timer_check"
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
`;
const KERNEL_CMDLINE = 'root=LABEL=root rw console=ttyS0,115200 panic=-1 no_timer_check';

/**
 * What the admin types once stagedroot is installed with npm (docs/install.md), before
 * the adoption: the units and the initramfs hook, then Debian's initramfs rebuilt with it.
 */
export const INSTALL_COMMANDS = ['stagedroot install --sysroot /stagedroot', 'update-initramfs -u'];

const STEP_UNIT = `[Unit]
Description=stagedroot real-boot test: this boot's step (the script on /dev/vdb)
After=multi-user.target stagedroot-health.service stagedroot-boot.service

[Service]
# simple, not oneshot: the boot is finished once the step has started, so the step can
# read \`systemd-analyze blame\` (which refuses while the boot is still running).
Type=simple
StandardOutput=journal+console
ExecStart=/bin/sh -c 'tr -d "\\\\000" </dev/vdb >/run/step.sh && exec /bin/sh /run/step.sh >/dev/ttyS1 2>&1'

[Install]
WantedBy=multi-user.target
`;

/** The stagedroot units' output on the serial console too (the console log keeps it when the journal is lost). */
const CONSOLE_DROPIN = `[Service]
StandardOutput=journal+console
StandardError=journal+console
`;

/** A required health check that passes when prepare-root made the root (the record exists). */
const HEALTH_CHECK = `#!/bin/sh
test -f /run/stagedroot/booted
`;

/**
 * One machine's disk (`firmware`: bios or uefi) at `<work>/<firmware>.img`, and for UEFI
 * its own NVRAM (`<work>/<firmware>.vars.fd`, where `bootctl set-oneshot` writes).
 */
export function buildMachine({ firmware, us, work, tarball, log }) {
  const t0 = Date.now();
  const img = path.join(work, `${firmware}.img`);
  fs.rmSync(img, { force: true });
  run('truncate', ['-s', '6G', img]);
  run('sfdisk', ['-q', img], { input: GPT[firmware] });
  const root = path.join(work, `${firmware}.mnt`);
  const kernel = withDisk(img, (a, dev) => {
    run('mkfs.ext4', ['-q', '-L', 'root', `${dev}p2`]);
    if (firmware === 'uefi') run('mkfs.vfat', ['-F', '32', '-n', 'ESP', `${dev}p1`]);
    a.mount([`${dev}p2`], root);
    // The installed system: the userspace copied onto its partition.
    run('cp', ['-a', `${us}/root/.`, root]);
    const version = kernelIn(root, 'cloud-amd64');
    fs.writeFileSync(path.join(root, 'etc/hostname'), `stagedroot-${firmware}\n`);
    fs.writeFileSync(path.join(root, 'etc/fstab'), `LABEL=root / ext4 defaults 0 1\n${firmware === 'uefi' ? 'LABEL=ESP /boot/efi vfat umask=0077 0 1\n' : ''}`);
    fs.rmSync(path.join(root, 'etc/machine-id'), { force: true });
    run('systemd-machine-id-setup', ['--root', root]);
    a.api(root, dev);
    const debs = `/tmp/debs-${firmware}`;
    fs.cpSync(path.join(us, 'debs', firmware === 'bios' ? 'grub-pc' : 'systemd-boot'), path.join(root, debs), { recursive: true });
    if (firmware === 'bios') {
      fs.appendFileSync(path.join(root, 'etc/default/grub'), GRUB_DEFAULTS);
      inMachine(root, 'sh', ['-c', `dpkg -i ${debs}/*.deb`]);
      inMachine(root, 'grub-install', ['--target=i386-pc', dev]);
      inMachine(root, 'update-grub', []);
    } else {
      fs.mkdirSync(path.join(root, 'etc/kernel'), { recursive: true });
      fs.writeFileSync(path.join(root, 'etc/kernel/cmdline'), `${KERNEL_CMDLINE}\n`);
      withEsp(`${dev}p1`, root, () => {
        inMachine(root, 'sh', ['-c', `dpkg -i ${debs}/*.deb`]);
        // Named: here it is a tmpfs (in the machine it is found at /boot/efi).
        inMachine(root, 'bootctl', ['install', '--no-variables', '--esp-path=/boot/efi']);
        inMachine(root, 'kernel-install', ['add', version, `/boot/vmlinuz-${version}`, `/boot/initrd.img-${version}`]);
        fs.writeFileSync(path.join(root, 'boot/efi/loader/loader.conf'), 'timeout 0\nconsole-mode keep\n');
      });
    }
    fs.rmSync(path.join(root, debs), { recursive: true });
    // Node.js in /usr/local as its release tarball installs it, then the package.
    fs.copyFileSync(process.execPath, path.join(root, 'usr/local/bin/node'));
    fs.chmodSync(path.join(root, 'usr/local/bin/node'), 0o755);
    run('npm', ['install', '-g', '--prefix', path.join(root, 'usr/local'), '--no-audit', '--no-fund', '--omit=dev', tarball]);
    // Its admin's first commands, run inside the machine (in a TCG guest the initramfs
    // build alone takes minutes).
    for (const c of INSTALL_COMMANDS) inMachine(root, 'sh', ['-c', c]);
    const listed = inMachine(root, 'lsinitramfs', [`/boot/initrd.img-${version}`]);
    if (!listed.includes('usr/lib/stagedroot/stagedroot-prepare-root')) throw new Error(`update-initramfs put no stagedroot-prepare-root in /boot/initrd.img-${version}`);
    // The initramfs the machine builds itself later (a kernel that `stage --run` installs)
    // holds the modules this VM boots with, as a small VM's admin configures it: with
    // Debian's MODULES=most, a TCG guest spends over ten minutes of the stage in it.
    fs.writeFileSync(path.join(root, 'etc/initramfs-tools/conf.d/stagedroot-test-modules'), 'MODULES=list\n');
    fs.appendFileSync(path.join(root, 'etc/initramfs-tools/modules'), 'virtio_pci\nvirtio_blk\next4\n');
    // The test's own instrumentation: this boot's step, and a required health check.
    fs.writeFileSync(path.join(root, 'etc/systemd/system/stagedroot-test-step.service'), STEP_UNIT);
    fs.mkdirSync(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    fs.symlinkSync('../stagedroot-test-step.service', path.join(root, 'etc/systemd/system/multi-user.target.wants/stagedroot-test-step.service'));
    for (const unit of ['stagedroot-boot', 'stagedroot-health', 'stagedroot-finalize']) {
      fs.mkdirSync(path.join(root, `etc/systemd/system/${unit}.service.d`), { recursive: true });
      fs.writeFileSync(path.join(root, `etc/systemd/system/${unit}.service.d/test-console.conf`), CONSOLE_DROPIN);
    }
    fs.mkdirSync(path.join(root, 'etc/stagedroot/health/required.d'), { recursive: true });
    fs.writeFileSync(path.join(root, 'etc/stagedroot/health/required.d/10-prepare-root-ran'), HEALTH_CHECK, { mode: 0o755 });
    return version;
  });
  fs.rmdirSync(root);
  let vars = null;
  if (firmware === 'uefi') {
    vars = path.join(work, 'uefi.vars.fd');
    fs.copyFileSync('/usr/share/OVMF/OVMF_VARS_4M.fd', vars);
  }
  log(`${firmware} machine built (${((Date.now() - t0) / 1000).toFixed(1)}s): kernel ${kernel}`);
  return { firmware, img, vars, kernel };
}

/** `npm pack` of the built package, as published. */
export function pack(work) {
  const dir = path.join(work, 'pack');
  fs.mkdirSync(dir, { recursive: true });
  const name = run('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: REPO }).trim().split('\n').at(-1);
  return path.join(dir, name);
}

/**
 * The second kernel's packages on a small ext4 disk (the guest mounts it at /mnt), as an
 * admin carries a package to an offline machine.
 */
export function buildPackageDisk({ us, work }) {
  const dir = path.join(work, 'pkgdisk');
  fs.mkdirSync(dir, { recursive: true });
  fs.cpSync(path.join(us, 'debs/kernel2'), path.join(dir, 'kernel2'), { recursive: true });
  const img = path.join(work, 'packages.img');
  run('mkfs.ext4', ['-q', '-F', '-L', 'packages', '-d', dir, img, '512M']);
  fs.rmSync(dir, { recursive: true });
  return img;
}
