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
