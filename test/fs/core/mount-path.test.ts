import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesystemPath, filesystemTypeOfDevice, pathHere } from '../../../src/fs/core/mount-path.js';

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

describe('filesystemTypeOfDevice: a device\'s filesystem type, from mountinfo', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-mountinfo-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const mountinfo = (lines: string[]): string => {
    const f = path.join(dir, 'mountinfo');
    fs.writeFileSync(f, lines.join('\n') + '\n');
    return f;
  };
  // st_dev as glibc encodes it: minor's low byte, major, minor's high bits.
  const dev = (major: number, minor: number): number => (minor & 0xff) | (major << 8) | ((minor & ~0xff) << 12);

  it('reads the type after the separator, optional fields or not, by major:minor (a minor above 255 included)', () => {
    const f = mountinfo([
      '22 1 8:1 / / rw,relatime shared:1 master:2 - ext4 /dev/sda1 rw',
      '30 22 259:1 / /boot/efi rw,relatime - vfat /dev/nvme0n1p1 rw,fmask=0077',
      `31 22 7:300 / ${path.join(dir, 'a\\040b')} rw - msdos /dev/loop300 rw`,
      'short line',
    ]);
    expect(filesystemTypeOfDevice(dev(8, 1), f)).toBe('ext4');
    expect(filesystemTypeOfDevice(dev(259, 1), f)).toBe('vfat');
    expect(filesystemTypeOfDevice(dev(7, 300), f)).toBe('msdos');
  });

  it('is undefined where it cannot tell: no mount of the device, mounts that disagree, no mountinfo, a device number past 32 bits', () => {
    const f = mountinfo(['22 1 8:1 / / rw - ext4 /dev/sda1 rw', '23 1 8:2 / /a rw - ext4 /dev/sda2 rw', '24 1 8:2 / /b rw - xfs /dev/sda2 rw', '25 1 8:3 / /c rw']);
    expect(filesystemTypeOfDevice(dev(8, 9), f)).toBeUndefined();
    expect(filesystemTypeOfDevice(dev(8, 2), f)).toBeUndefined();
    expect(filesystemTypeOfDevice(dev(8, 3), f)).toBeUndefined();
    expect(filesystemTypeOfDevice(dev(8, 1), path.join(dir, 'none'))).toBeUndefined();
    expect(filesystemTypeOfDevice(2 ** 40, f)).toBeUndefined();
  });

  it('names this machine\'s /proc: proc', () => {
    expect(filesystemTypeOfDevice(fs.statSync('/proc').dev)).toBe('proc');
  });
});
