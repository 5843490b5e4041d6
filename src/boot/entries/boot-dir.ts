/**
 * Where the boot directory is: the sysroot's path on its filesystem, the boot directory
 * found from the state's record of it, and that record.
 */
import * as path from 'node:path';
import type { Context } from '../../context.js';
import { statPath } from '../../fs/core/host-paths.js';
import { filesystemPath, pathHere, type FilesystemPath } from '../../fs/core/mount-path.js';
import type { BaseState } from '../../state/schema.js';

/**
 * The sysroot's path on its filesystem (what `stagedroot=` names and GRUB reads), the
 * same before the first boot under stagedroot (`/stagedroot`) and after it
 * (`/sysroot/stagedroot`).
 */
export function sysrootOnFilesystem(ctx: Context, fp: FilesystemPath | null = filesystemPath(ctx.layout.root)): string {
  return fp?.onFilesystem ?? ctx.layout.root;
}

/**
 * Where the boot directory is now. One on the sysroot's own filesystem (a GRUB
 * directory under the physical root's /boot) is found from the sysroot's path, as the
 * sysroot itself is found (`/stagedroot` before the first boot under stagedroot,
 * `/sysroot/stagedroot` from the initramfs's record after it): `../boot/grub` is
 * `/boot/grub`, then `/sysroot/boot/grub` (the booted tree's own /boot is a copy nothing
 * reads). States written before that resolve through the filesystem's mount, or use the
 * absolute path they recorded.
 */
export function bootDirectory(ctx: Context, s: BaseState, mounts: () => FilesystemPath | null = () => filesystemPath(ctx.layout.root)): string | null {
  if (!s.bootDir) return null;
  if (s.bootDirFromSysroot !== undefined) return path.resolve(ctx.layout.root, s.bootDirFromSysroot);
  if (s.bootDirOnSysrootFs) {
    const fp = mounts();
    const here = fp && pathHere(fp, s.bootDirOnSysrootFs);
    if (here) return here;
  }
  return s.bootDir;
}

/**
 * The state's record of a boot directory: its absolute path as given, and, when it is on
 * the sysroot's filesystem, its path relative to the sysroot (see bootDirectory). The
 * relation is taken from both paths on that filesystem (symlinks and bind mounts
 * resolved) and must lead back to the same directory from the sysroot's path as given.
 */
export function bootDirRecord(root: string, bootDir: string): Pick<BaseState, 'bootDir' | 'bootDirFromSysroot'> {
  const sysrootFs = filesystemPath(root);
  const bootFs = filesystemPath(bootDir);
  if (sysrootFs === null || bootFs === null || sysrootFs.dev !== bootFs.dev) return { bootDir };
  const rel = path.posix.relative(sysrootFs.onFilesystem, bootFs.onFilesystem) || '.';
  const a = statPath(path.resolve(root, rel));
  const b = statPath(bootDir);
  if (a === null || b === null || a.dev !== b.dev || a.ino !== b.ino) return { bootDir };
  return { bootDir, bootDirFromSysroot: rel };
}
