/**
 * Filesystems for the benchmark's btrfs, XFS and ext4 rows: a sparse image file formatted and
 * mounted on a loop device under the bench directory. When one cannot be made (not root,
 * no mkfs, no loop devices), says why instead, and the report says so.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';

const MKFS = {
  btrfs: (img) => ['mkfs.btrfs', ['-q', img]],
  xfs: (img) => ['mkfs.xfs', ['-q', '-m', 'reflink=1', img]],
  // The portable path's own floor, away from the root filesystem's other writers.
  ext4: (img) => ['mkfs.ext4', ['-q', '-F', img]],
};

/** Returns { dir, cleanup } for a mounted filesystem of `type`, or { why } when it cannot be made. */
export function loopMount(base, type, sizeGiB) {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return { why: `not root: a ${type} loop mount needs root` };
  const root = fs.mkdtempSync(path.join(base, `${type}-`));
  const img = path.join(root, 'fs.img');
  const dir = path.join(root, 'mnt');
  fs.mkdirSync(dir);
  fs.writeFileSync(img, '');
  fs.truncateSync(img, sizeGiB * 2 ** 30);
  const [cmd, args] = MKFS[type](img);
  for (const [c, a] of [[cmd, args], ['mount', ['-o', 'loop', img, dir]]]) {
    const r = spawnSync(c, a, { encoding: 'utf8' });
    if (r.error || r.status !== 0) {
      fs.rmSync(root, { recursive: true, force: true });
      return { why: `${c} failed: ${(r.error?.message ?? r.stderr ?? '').trim().split('\n').pop()}` };
    }
  }
  return {
    dir,
    cleanup: () => {
      spawnSync('umount', [dir]);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
