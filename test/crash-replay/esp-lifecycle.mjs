// The ESP's lifecycle: systemd-boot entries on a FAT partition under the log, the sysroot
// beside it on an ext4 disk that is not logged. The guest makes the sysroot itself (`init
// --boot-dir` needs the ESP mounted, and this host's kernel has no vfat), then stages a
// new kernel, finalizes, boots, stages an /etc change, finalizes, rolls back and prunes,
// one mark on the ESP's log after each operation with the current deployment and each
// deployment's kernel reported beside it. esp.check.ts replays the log: what systemd-boot
// would read at every flush point, and exactly the current deployment at every mark.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The ESP's size (FAT32; small kernels: the cluster chains still span many sectors). */
const ESP_SIZE = 64 << 20;
const SYS_SIZE = 256 << 20;
/** Where the guest mounts them. */
export const ESP_MOUNT = '/mnt/esp';
export const ESP_SYS_MOUNT = '/mnt/esp-sys';
export const ESP_SYSROOT = `${ESP_SYS_MOUNT}/sysroot`;
const TREE = `${ESP_SYS_MOUNT}/tree`;

/** The kernel versions: the first deployment's, and the update's. */
export const KERNELS = ['6.1.0-1', '6.2.0-2'];

/** A kernel or initramfs image: its name and version first (what esp.check.ts reads back), then seeded bytes. */
export function kernelImage(kind, version, size) {
  const out = Buffer.alloc(size);
  const head = Buffer.from(`${kind} ${version}\n`);
  head.copy(out);
  let block = Buffer.from(`${kind}:${version}`);
  for (let off = head.length; off < size; off += 32) {
    block = createHash('sha256').update(block).digest();
    block.copy(out, off, 0, Math.min(32, size - off));
  }
  return out;
}
const KERNEL_SIZE = 300 << 10;
const INITRD_SIZE = 200 << 10;
const images = (v) => [
  { path: `/usr/lib/modules/${v}/vmlinuz`, data: kernelImage('KERNEL', v, KERNEL_SIZE) },
  { path: `/usr/lib/modules/${v}/initramfs.img`, data: kernelImage('INITRD', v, INITRD_SIZE) },
];
/** The sha256 of each image by the name systemd-boot's entries give it (vmlinuz-V, initramfs-V.img). */
export function imageDigests() {
  const out = {};
  for (const v of KERNELS) {
    for (const { path: p, data } of images(v)) out[p.endsWith('vmlinuz') ? `vmlinuz-${v}` : `initramfs-${v}.img`] = createHash('sha256').update(data).digest('hex');
  }
  return out;
}

function run(cmd, args) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

/** The ESP's base (an empty FAT32, what the log starts from) and the sysroot disk (ext4 holding the first tree). */
export function buildEspDisks(dir) {
  const esp = path.join(dir, 'base.img');
  fs.rmSync(esp, { force: true });
  fs.writeFileSync(esp, '');
  fs.truncateSync(esp, ESP_SIZE);
  run('mkfs.vfat', ['-F', '32', '-n', 'ESP', esp]);
  const src = path.join(dir, 'sys-src');
  fs.rmSync(src, { recursive: true, force: true });
  const files = {
    'etc/os-release': 'ID=replay\nVERSION_ID=1\n',
    'etc/hostname': 'replay-esp\n',
    'usr/lib/os-release': 'ID=replay\nVERSION_ID=1\n',
    'usr/bin/tool': '#!/bin/sh\necho tool\n',
  };
  const tree = path.join(src, 'tree');
  for (const [p, c] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(tree, p)), { recursive: true });
    fs.writeFileSync(path.join(tree, p), c);
  }
  for (const { path: p, data } of images(KERNELS[0])) {
    fs.mkdirSync(path.dirname(path.join(tree, p)), { recursive: true });
    fs.writeFileSync(path.join(tree, p), data);
  }
  fs.mkdirSync(path.join(tree, 'var'));
  const sys = path.join(dir, 'sys.img');
  fs.rmSync(sys, { force: true });
  run('mkfs.ext4', ['-q', '-F', '-d', src, sys, `${SYS_SIZE >> 20}M`]);
  fs.rmSync(src, { recursive: true, force: true });
  return { esp, sys };
}

const spec = (name, o) => ({ file: `/run/${name}.json`, content: `${JSON.stringify(o)}\n` });
const cli = (name, ...args) => ({ name, cli: args });
const b64 = (data) => ({ base64: data.toString('base64') });

/** The ESP's lifecycle (the driver's step forms, lifecycle.mjs). */
export const ESP_STEPS = [
  cli('init', 'init', '--from', TREE, '--label', 'base', '--boot-dir', ESP_MOUNT, '--boot-loader', 'systemd-boot', '--kernel-argument', 'root=LABEL=replay', '--kernel-argument', 'rw'),
  { mark: '00-init' },
  spec('kernel', { label: 'kernel', files: images(KERNELS[1]).map((i) => ({ path: i.path, contents: b64(i.data) })), remove: images(KERNELS[0]).map((i) => i.path) }),
  cli('stage-kernel', 'stage', '/run/kernel.json'),
  { mark: '01-staged-kernel' },
  cli('finalize-kernel', 'finalize'),
  { mark: '02-finalized-kernel' },
  cli('boot-kernel', 'boot'),
  { mark: '03-booted-kernel' },
  cli('health-kernel', 'health', '--check', 'true'),
  { mark: '04-healthy-kernel' },
  spec('etc', { label: 'etc', files: [{ path: '/etc/motd', contents: 'etc update\n' }] }),
  cli('stage-etc', 'stage', '/run/etc.json'),
  cli('finalize-etc', 'finalize'),
  { mark: '05-finalized-etc' },
  cli('boot-etc', 'boot'),
  cli('health-etc', 'health', '--check', 'true'),
  { mark: '06-healthy-etc' },
  cli('rollback', 'rollback'),
  { mark: '07-rolled-back' },
  cli('boot-rollback', 'boot'),
  cli('prune', 'prune', '--keep', '1'),
  { mark: '08-pruned' },
];

/** The guest's set-up of the ESP lifecycle: disk `espDisk` under the log on `logDisk`, mounted vfat; the sysroot disk mounted beside it. */
export function espSetup(espDisk, logDisk, sysDisk) {
  return `modprobe vfat || fail "modprobe vfat"
n=$(blockdev --getsz ${espDisk})
dmsetup create log-esp --noudevsync --table "0 $n log-writes ${espDisk} ${logDisk}" || fail "dmsetup create log-esp"
[ -b /dev/mapper/log-esp ] || dmsetup mknodes log-esp
mkdir -p ${ESP_MOUNT} ${ESP_SYS_MOUNT}
mount -t vfat /dev/mapper/log-esp ${ESP_MOUNT} || fail "mount vfat"
mount -t ext4 ${sysDisk} ${ESP_SYS_MOUNT} || fail "mount the ESP lifecycle's sysroot disk"`;
}

export const espTeardown = `umount ${ESP_MOUNT} || fail "umount ${ESP_MOUNT}"
dmsetup remove log-esp || fail "dmsetup remove log-esp"
umount ${ESP_SYS_MOUNT} || fail "umount ${ESP_SYS_MOUNT}"`;
