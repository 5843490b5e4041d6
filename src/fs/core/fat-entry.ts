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

/** Where a FatProbe reads: a device's type in mountinfo (undefined: not named), and statfs(2)'s answer for a directory. */
export interface FatSources {
  typeOfDevice(dev: number): string | undefined;
  statfsSaysFat(dir: string): boolean;
}

const HOST_SOURCES: FatSources = {
  typeOfDevice: (dev) => filesystemTypeOfDevice(dev),
  statfsSaysFat: (dir) => filesystemIs(dir, MSDOS_SUPER_MAGIC),
};

/**
 * Whether a directory is on FAT, without statfs(2) on FAT: the first statfs of a vfat
 * mount counts its free clusters, a read of the whole FAT (120 ms in the real-boot guest's
 * apply-live, the first write to its ESP since the boot). A device is looked up in
 * mountinfo once (the read is O(mounts): on a node with hundreds of container mounts it
 * costs milliseconds, and every rename of the sysroot's own files asks), statfs only where
 * mountinfo does not name it. Later answers per device: FAT stays FAT (if the number is
 * reused by another filesystem, the only cost is an fsync); not FAT is asked of statfs
 * again (cheap off FAT, and right when the number now names a FAT mount).
 */
export class FatProbe {
  private readonly byDevice = new Map<number, boolean>();

  constructor(private readonly sources: FatSources = HOST_SOURCES) {}

  onFat(dir: string): boolean {
    let dev: number;
    try {
      dev = fs.statSync(dir).dev;
    } catch {
      return false;
    }
    const known = this.byDevice.get(dev);
    if (known === true) return true;
    let fat: boolean;
    if (known === false) fat = this.sources.statfsSaysFat(dir);
    else {
      const type = this.sources.typeOfDevice(dev);
      fat = type === undefined ? this.sources.statfsSaysFat(dir) : FAT_TYPES.has(type);
    }
    this.byDevice.set(dev, fat);
    return fat;
  }
}

const hostProbe = new FatProbe();

/** Whether `dir` is on FAT (the process's FatProbe). */
export function onFat(dir: string): boolean {
  return hostProbe.onFat(dir);
}
