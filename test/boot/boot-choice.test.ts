/**
 * An older entry picked at boot (the boot menu, grub-reboot, bootctl set-oneshot): the
 * initramfs boots the deployment the entry names and records it; `boot` takes it as a
 * choice, not a failure.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { formatStatus } from '../../src/cli/format.js';
import { bootRecords } from '../helpers/boot.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

/** What prepare-root records after booting deployment `id` (tests in test/initramfs run the real script). */
const { record: recorded } = bootRecords('/sysroot');

describe('booting an entry other than the default', () => {
  it('the rollback picked for one boot: recorded as a choice, current unchanged, nothing marked bad; the next default boot runs current', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    await t.sysroot.boot(recorded(t.dir, '0002', ['tries-left=2']));
    await t.sysroot.markGood();
    // The admin picks the old entry (0001) for one boot.
    const r = await t.sysroot.boot(recorded(t.dir, '0001'));
    expect(r.event).toEqual({ kind: 'booted', id: '0001', triesLeft: null });
    const st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0002', rollback: '0001', pendingReboot: true, bootedByChoice: true, lastFailure: null });
    expect(st.deployments.map((d) => [d.id, d.good, d.failed])).toEqual([['0002', true, false], ['0001', true, false]]);
    expect(formatStatus(st)).toContain('booted by choice: 0001 was picked at boot instead of current 0002');
    // The next default boot runs current again: no longer a choice.
    await t.sysroot.boot(recorded(t.dir, '0002'));
    expect(t.sysroot.status()).toMatchObject({ booted: '0002', current: '0002', pendingReboot: false, bootedByChoice: false });
  });

  it('an update under assessment keeps its tries when the old entry is picked; a fallback of the initramfs is not a choice', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    await t.sysroot.boot(recorded(t.dir, '0001'));
    let st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0002', bootedByChoice: true });
    expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ triesLeft: 3, failed: false });
    expect(fs.readFileSync(path.join(t.dir, 'boot-tries/0002'), 'utf8')).toBe('3\n');
    // The initramfs gave up on 0002 (its tries used): recorded as the fallback it is.
    await t.sysroot.boot(recorded(t.dir, '0001', ['fell-back-from=0002']));
    st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0001', bootedByChoice: false });
    expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ failed: true });
  });
});
