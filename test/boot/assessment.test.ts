import { afterEach, describe, expect, it } from 'vitest';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

describe('boot tries (automatic boot assessment)', () => {
  it('three boots without mark-good roll back automatically: the 4th boot lands on the old deployment', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'VERSION=1\n' } });
    await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/os-release', contents: 'VERSION=2\n' }] });
    // Boot 1 (finalize at shutdown, then boot): tries 3 → 2.
    const first = await reboot(t.sysroot);
    expect(first.finalize).toMatchObject({ finalized: true, id: '0002' });
    expect(first.boot.event).toEqual({ kind: 'booted', id: '0002', triesLeft: 2 });
    // Boots 2 and 3: the machine came up but nobody marked it good.
    expect((await t.sysroot.boot()).event).toEqual({ kind: 'booted', id: '0002', triesLeft: 1 });
    expect((await t.sysroot.boot()).event).toEqual({ kind: 'booted', id: '0002', triesLeft: 0 });
    // Boot 4: no tries left, the last good deployment boots instead.
    const fourth = await t.sysroot.boot();
    expect(fourth.event).toMatchObject({ kind: 'fell-back', from: '0002', to: '0001' });
    const st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0001', pendingReboot: false });
    expect(st.lastFailure).toMatchObject({ id: '0002', label: 'v2', phase: 'boot', reason: 'deployment 0002 used all 3 boot tries without being marked good' });
    expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ failed: true, good: false });
    // And it stays there.
    expect((await t.sysroot.boot()).event).toEqual({ kind: 'booted', id: '0001', triesLeft: null });
  });

  it('the CLI boot hook says so and exits 1 on the automatic rollback', async () => {
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/a', contents: 'x' }] });
    await t.sysroot.finalize();
    for (let i = 0; i < 3; i++) expect((await cli(['boot', '--sysroot', t.dir])).code).toBe(0);
    const r = await cli(['boot', '--sysroot', t.dir]);
    expect(r.code).toBe(1);
    expect(r.out).toBe('automatic rollback: deployment 0002 used all 3 boot tries without being marked good; booted 0001 instead\n');
  });

  it('mark-good within the tries keeps the new deployment', async () => {
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ files: [{ path: '/etc/a', contents: 'x' }] });
    await reboot(t.sysroot);
    await t.sysroot.boot();
    await t.sysroot.markGood();
    for (let i = 0; i < 5; i++) expect((await t.sysroot.boot()).event).toEqual({ kind: 'booted', id: '0002', triesLeft: null });
  });
});
