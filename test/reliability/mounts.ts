import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * Mounts for the ENOSPC and reflink tests. They need root (mounting works on the CI
 * machines); elsewhere `whyNotMount` gives the reason, which the tests print when
 * they skip, so a skip is never a silent pass.
 */
export function whyNotMount(kind: 'tmpfs' | 'xfs'): string | null {
  if (process.platform !== 'linux') return `mount tests need Linux, this is ${process.platform}`;
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return `mount tests need root (running as uid ${process.getuid?.()})`;
  if (kind === 'xfs') {
    if (spawnSync('sh', ['-c', 'command -v mkfs.xfs']).status !== 0) return 'mkfs.xfs is not installed (apt-get install xfsprogs)';
    if (!fs.existsSync('/dev/loop-control')) return 'there are no loop devices (/dev/loop-control is missing)';
  }
  // Try it: a container may be root without CAP_SYS_ADMIN.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-mount-probe-'));
  try {
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { encoding: 'utf8' });
    if (r.status !== 0) return `mount fails here: ${(r.stderr || r.error?.message || '').trim()}`;
    spawnSync('umount', [dir]);
    return null;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function mountTmpfs(dir: string, size: string): void {
  fs.mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
}

/** A loop-mounted XFS with reflinks, in a sparse image file beside the mount point. */
export function mountXfsReflink(dir: string, image: string, size = '400M'): void {
  fs.mkdirSync(dir, { recursive: true });
  execFileSync('truncate', ['-s', size, image]);
  execFileSync('mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', image]);
  execFileSync('mount', ['-o', 'loop', image, dir]);
}

/** Unmounts if mounted (lazily when busy); never throws, for afterAll. */
export function unmount(dir: string): void {
  if (spawnSync('mountpoint', ['-q', dir]).status !== 0) return;
  if (spawnSync('umount', [dir]).status !== 0) spawnSync('umount', ['-l', dir]);
}

/** Bytes in use on the filesystem holding `p`. */
export function usedBytes(p: string): number {
  execFileSync('sync', ['-f', p]);
  const s = fs.statfsSync(p);
  return (s.blocks - s.bfree) * s.bsize;
}
