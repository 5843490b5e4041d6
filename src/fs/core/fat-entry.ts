import * as fs from 'node:fs';
import * as path from 'node:path';
import { filesystemIs } from './host-paths.js';
import { filesystemTypeOfDevice } from './mount-path.js';

/** statfs(2)'s f_type of FAT (vfat, msdos): an EFI system partition. */
const MSDOS_SUPER_MAGIC = 0x4d44;

/**
 * Makes a name just renamed into place on FAT point at its content. FAT keeps a file's
 * first cluster and size in its directory entry, and Linux's vfat rename writes the new
 * entry with neither: they reach the entry when the file's inode is written back, up to a
 * minute later, and the fsync of the directory does not do it. A power cut before then
 * leaves an empty file (or an empty directory) under the new name, the old one gone: an
 * ESP's boot entry that systemd-boot skips, the menu falling back to the entry before it
 * (seen in the real-boot test). An fsync of the entry itself writes its inode, so its
 * directory entry, before the directory's fsync that follows. Elsewhere (ext4, XFS,
 * btrfs: the inode is not in the directory) nothing is done.
 */
export function syncRenamedOnFat(p: string): void {
  if (!onFat(path.dirname(p))) return;
  const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** mountinfo's names of the filesystems statfs(2) reports as MSDOS_SUPER_MAGIC. */
const FAT_TYPES = new Set(['vfat', 'msdos']);

/**
 * Whether `dir` is on FAT: its device's filesystem type in mountinfo, and only where
 * mountinfo does not say, statfs(2). Not statfs first: the first statfs of a vfat mount
 * counts its free clusters, a read of the whole FAT (120 ms in the real-boot guest's
 * apply-live, the first write to its ESP since the boot), and that is every write's
 * question here, the sysroot's own files included.
 */
export function onFat(dir: string): boolean {
  let dev: number;
  try {
    dev = fs.statSync(dir).dev;
  } catch {
    return false;
  }
  const type = filesystemTypeOfDevice(dev);
  return type === undefined ? filesystemIs(dir, MSDOS_SUPER_MAGIC) : FAT_TYPES.has(type);
}
