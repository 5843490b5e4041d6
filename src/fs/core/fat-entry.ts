import * as fs from 'node:fs';
import * as path from 'node:path';
import { filesystemIs } from './host-paths.js';

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
  if (!filesystemIs(path.dirname(p), MSDOS_SUPER_MAGIC)) return;
  const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
