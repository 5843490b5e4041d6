import { expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execaSync } from 'execa';

/**
 * Why a tmpfs cannot be mounted here, or null when it can (probed with a real 1 MiB
 * mount). Tests that need one skip with this reason printed, never silently.
 */
export function whyNoTmpfs(): string | null {
  if (process.getuid?.() !== 0) return 'not root (mounting a tmpfs needs root)';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-mnt-probe-'));
  try {
    execaSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]);
    execaSync('umount', [dir]);
    return null;
  } catch (err) {
    return `cannot mount a tmpfs: ${(err as Error).message.split('\n')[0]}`;
  } finally {
    fs.rmdirSync(dir);
  }
}

/**
 * A fresh tmpfs mounted on a new directory under `parent`: another filesystem than
 * `parent`'s, whatever this machine's temp dir or /dev/shm are. Throws naming why it could
 * not be mounted (not root, no tmpfs); `cleanup` unmounts and removes the directory.
 */
export function mountTmpfs(parent: string, sizeMiB = 64): { mnt: string; cleanup(): void } {
  if (process.getuid?.() !== 0) throw new Error('mounting a tmpfs needs root');
  const mnt = fs.mkdtempSync(path.join(parent, 'tmpfs-'));
  try {
    execaSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m`, 'tmpfs', mnt]);
  } catch (err) {
    fs.rmdirSync(mnt);
    throw new Error(`cannot mount a tmpfs on ${mnt}: ${(err as Error).message.split('\n')[0]}`);
  }
  return {
    mnt,
    cleanup: () => {
      execaSync('umount', [mnt]);
      fs.rmdirSync(mnt);
    },
  };
}

const MIB = 1024 * 1024;

function hasCommand(cmd: string): boolean {
  try {
    execaSync('sh', ['-c', `command -v ${cmd}`]);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why an XFS loop mount with reflinks cannot be made here, or null when it can (the tools
 * are checked here; the mount itself in mountXfsLoop, which throws when it fails).
 */
export function whyNoXfsLoop(): string | null {
  if (process.getuid?.() !== 0) return 'not root (loop devices and mount need root)';
  if (!hasCommand('mkfs.xfs')) return 'mkfs.xfs is not installed (apt-get install xfsprogs)';
  if (!hasCommand('xfs_io')) return 'xfs_io is not installed (apt-get install xfsprogs)';
  if (!hasCommand('losetup')) return 'losetup is not installed (util-linux)';
  if (!fs.existsSync('/dev/loop-control')) return 'no /dev/loop-control: this machine cannot create loop devices';
  return null;
}

export interface XfsLoop {
  /** The mount point. */
  mnt: string;
  /** Unmounts, detaches the loop device, removes the image; throws naming what could not be undone. */
  cleanup(): void;
}

/**
 * A fresh XFS filesystem made with `reflink=1` on a sparse file-backed loop device (on
 * tmpfs when there is one), mounted. `cleanup` undoes whatever was set up, even when a
 * step failed half-way.
 */
export function mountXfsLoop(prefix: string, sizeMiB = 512): XfsLoop {
  let parent = os.tmpdir();
  try {
    fs.accessSync('/dev/shm', fs.constants.W_OK);
    parent = '/dev/shm';
  } catch {
    // no tmpfs: the usual temp dir
  }
  const scratch = fs.mkdtempSync(path.join(parent, prefix));
  const mnt = path.join(scratch, 'mnt');
  let loop: string | undefined;
  let mounted = false;
  const cleanup = (): void => {
    const errors: string[] = [];
    if (mounted) {
      try {
        execaSync('umount', [mnt]);
      } catch (err) {
        errors.push(`umount ${mnt}: ${(err as Error).message}`);
        try {
          execaSync('umount', ['-l', mnt]);
        } catch {
          // reported above
        }
      }
    }
    if (loop) {
      try {
        execaSync('losetup', ['-d', loop]);
      } catch (err) {
        errors.push(`losetup -d ${loop}: ${(err as Error).message}`);
      }
    }
    fs.rmSync(scratch, { recursive: true, force: true });
    if (errors.length) throw new Error(`cleanup of the XFS loop mount failed: ${errors.join('; ')}`);
  };
  try {
    const image = path.join(scratch, 'xfs.img');
    fs.closeSync(fs.openSync(image, 'w'));
    fs.truncateSync(image, Math.max(sizeMiB, 300) * MIB); // mkfs.xfs needs 300 MB at least
    execaSync('mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', image]);
    loop = execaSync('losetup', ['-f', '--show', image]).stdout.trim();
    fs.mkdirSync(mnt);
    execaSync('mount', ['-t', 'xfs', loop, mnt]);
    mounted = true;
  } catch (err) {
    cleanup();
    throw err;
  }
  return { mnt, cleanup };
}

/**
 * How many of a file's bytes share their blocks with another file (FIEMAP's
 * FIEMAP_EXTENT_SHARED, 0x2000, read with `xfs_io -c 'fiemap -v'`), and its extent bytes.
 */
export function sharedExtentBytes(file: string): { shared: number; total: number } {
  execaSync('sync', ['-f', file]); // delayed allocation: extents exist once written back
  const out = execaSync('xfs_io', ['-r', '-c', 'fiemap -v', file]).stdout;
  let shared = 0;
  let total = 0;
  // " 0: [0..591]: 192..783 592 0x2001" (offsets and lengths in 512-byte sectors)
  for (const m of out.matchAll(/^\s*\d+:\s+\[\d+\.\.\d+\]:\s+(\d+\.\.\d+|hole)\s+(\d+)\s*(0x[0-9a-f]+)?/gm)) {
    if (m[1] === 'hole') continue;
    const bytes = Number(m[2]) * 512;
    total += bytes;
    if (parseInt(m[3] ?? '0', 16) & 0x2000) shared += bytes;
  }
  return { shared, total };
}

/** A btrfs filesystem on a loop device, mounted for a test; `cleanup` unmounts and removes it. */
export interface LoopMount {
  dir: string;
  cleanup(): void;
}

/**
 * Makes and mounts a btrfs (or XFS) filesystem in an image file, or says why it cannot
 * (not root, no mkfs, no loop devices): tests that need one skip loudly with the reason.
 */
export function loopMount(fsType: 'btrfs' | 'xfs', sizeMiB = 512): LoopMount | string {
  if (process.getuid?.() !== 0) return `not root (a ${fsType} loop mount needs root)`;
  const base = fs.mkdtempSync(path.join(os.tmpdir(), `stagedroot-${fsType}-`));
  const img = path.join(base, 'fs.img');
  const dir = path.join(base, 'mnt');
  fs.mkdirSync(dir);
  try {
    fs.writeFileSync(img, '');
    fs.truncateSync(img, sizeMiB * 1024 * 1024);
    execaSync(`mkfs.${fsType}`, fsType === 'xfs' ? ['-q', '-m', 'reflink=1', img] : ['-q', img]);
    execaSync('mount', ['-o', 'loop', img, dir]);
  } catch (err) {
    fs.rmSync(base, { recursive: true, force: true });
    return `cannot make a ${fsType} loop mount: ${(err as Error).message.split('\n')[0]}`;
  }
  return {
    dir,
    cleanup: () => {
      try {
        execaSync('umount', [dir]);
      } finally {
        fs.rmSync(base, { recursive: true, force: true });
      }
    },
  };
}

/** Why a btrfs loop mount cannot be made here (checked without mounting), or null. */
export function whyNoBtrfsLoop(): string | null {
  if (process.getuid?.() !== 0) return 'not root (a btrfs loop mount needs root)';
  for (const [cmd, args] of [['btrfs', ['--version']], ['mkfs.btrfs', ['--version']]] as const) {
    try {
      execaSync(cmd, [...args]);
    } catch {
      return `${cmd} is not installed (apt-get install btrfs-progs)`;
    }
  }
  if (!fs.existsSync('/dev/loop-control')) return 'no /dev/loop-control: this machine cannot create loop devices';
  return null;
}

/**
 * Stands in for a suite whose filesystem cannot be made here: a failing test that names
 * the reason (`.ci/run` installs every tool these suites need), never a skip that a
 * summary would count as nothing.
 */
export function unavailable(reason: string): void {
  it(`cannot run here: ${reason}`, () => expect.fail(`the suite could not run: ${reason}`));
}
