import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

describe('finalization lock', () => {
  it('a locked staged deployment survives finalize (and reboots) until unlocked', async () => {
    t = await tempSysroot({ tree: { 'etc/v': '1\n' } });
    const staged = await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/v', contents: '2\n' }] }, { lock: true });
    expect(t.sysroot.status()).toMatchObject({ staged: staged.id, finalizationLocked: true });

    for (let i = 0; i < 2; i++) {
      const r = await reboot(t.sysroot);
      expect(r.finalize).toEqual({ finalized: false, reason: 'locked', id: staged.id });
      expect(r.boot.event).toMatchObject({ kind: 'booted', id: '0001' });
      expect(t.sysroot.status()).toMatchObject({ current: '0001', booted: '0001', staged: staged.id, finalizationLocked: true });
      expect(fs.readFileSync(path.join(t.dir, 'current/etc/v'), 'utf8')).toBe('1\n');
    }

    await t.sysroot.setFinalizationLock(false);
    expect(t.sysroot.status().finalizationLocked).toBe(false);
    const r = await reboot(t.sysroot);
    expect(r.finalize).toMatchObject({ finalized: true, id: staged.id });
    expect(t.sysroot.status()).toMatchObject({ booted: staged.id, current: staged.id, staged: null });
    expect(fs.readFileSync(path.join(t.dir, 'current/etc/v'), 'utf8')).toBe('2\n');
  });

  it('through the CLI: stage --lock, finalize leaves it, unlock, finalize applies it', async () => {
    t = await tempSysroot({ tree: {} });
    const spec = path.join(t.scratch, 'u.json');
    fs.writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/a', contents: 'x' }] }));
    expect((await cli(['stage', spec, '--lock', '--sysroot', t.dir])).code).toBe(0);
    let r = await cli(['finalize', '--sysroot', t.dir]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('finalization-locked; nothing changed');
    r = await cli(['status', '--sysroot', t.dir]);
    expect(r.out).toContain('finalization locked: 0002 stays staged');
    expect((await cli(['unlock', '--sysroot', t.dir])).code).toBe(0);
    r = await cli(['finalize', '--sysroot', t.dir]);
    expect(r.out).toContain('finalized: deployment 0002 is current');
  });
});
