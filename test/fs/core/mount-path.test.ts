import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesystemPath, pathHere } from '../../../src/fs/core/mount-path.js';

describe('filesystemPath: a directory\'s place on its filesystem, from mountinfo', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-mountinfo-')));
    fs.mkdirSync(path.join(dir, 'a b/sysroot'), { recursive: true });
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const mountinfo = (lines: string[]): string => {
    const f = path.join(dir, 'mountinfo');
    fs.writeFileSync(f, lines.join('\n') + '\n');
    return f;
  };

  it('takes the longest mount point above the real path (the later of two), its root, escaped names', () => {
    const sysroot = path.join(dir, 'a b/sysroot');
    const f = mountinfo([
      '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
      `30 22 8:2 /data ${dir.replace(/ /g, '\\040')} rw - ext4 /dev/sda2 rw`,
      `31 22 8:3 /sub/x ${dir}/a\\040b rw - xfs /dev/sdb1 rw`,
      `32 22 8:3 /later ${dir}/a\\040b rw - xfs /dev/sdb1 rw`,
      'short line',
    ]);
    expect(filesystemPath(sysroot, f)).toMatchObject({ mountPoint: path.join(dir, 'a b'), mountRoot: '/later', onFilesystem: '/later/sysroot' });
    const fp = filesystemPath(path.join(dir, 'a b'), mountinfo(['22 1 8:1 / / rw - ext4 /dev/sda1 rw', `30 22 8:2 /data ${dir} rw - ext4 /dev/sda2 rw`]))!;
    expect(fp.onFilesystem).toBe('/data/a b');
    expect(pathHere(fp, '/data/a b/sysroot')).toBe(path.join(dir, 'a b/sysroot'));
    expect(pathHere(fp, '/elsewhere')).toBeNull();
  });

  it('is null when mountinfo cannot be read or names no mount above', () => {
    expect(filesystemPath(dir, path.join(dir, 'none'))).toBeNull();
    expect(filesystemPath(dir, mountinfo(['30 22 8:2 / /nowhere rw - ext4 /dev/sda2 rw']))).toBeNull();
  });
});
