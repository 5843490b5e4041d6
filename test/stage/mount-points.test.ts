import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

describe('mount points of the boot path', () => {
  it('every tree that boots (has an init) gets an empty sysroot/ (the physical root\'s mount point), in its manifest', async () => {
    t = await tempSysroot({ tree: { 'usr/sbin/init': { symlink: '../lib/systemd/systemd' }, 'usr/bin/sh': '#!\n', 'etc/os-release': 'ID=x\n' } });
    const first = t.sysroot.treePath('0001');
    expect(fs.statSync(path.join(first, 'sysroot')).isDirectory()).toBe(true);
    expect(fs.readdirSync(path.join(first, 'sysroot'))).toEqual([]);
    const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hi\n' }] });
    expect(fs.statSync(path.join(t.sysroot.treePath(r.id), 'sysroot')).isDirectory()).toBe(true);
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    expect((await t.sysroot.verify('0001')).drift).toEqual([]);
  });

  it('a tree without an init is left exactly as its source made it', async () => {
    t = await tempSysroot({ tree: { 'usr/bin/sh': '#!\n', 'etc/a': '1\n' } });
    expect(fs.existsSync(path.join(t.sysroot.treePath('0001'), 'sysroot'))).toBe(false);
  });
});
