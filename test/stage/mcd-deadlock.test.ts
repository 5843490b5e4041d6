/**
 * The machine-config-daemon's deadlock, replayed through the library: an update writes
 * /home/core/test/test while the booted tree has /home/core/test as a regular file.
 * Written into the live root, that update leaves a half-applied node that a person must
 * unstick. Staged, it is rejected, nothing the node runs changes, and the corrected
 * update simply goes through.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../src/exit-codes.js';
import { hashTree, reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { BASE_TREE } from '../helpers/trees.js';

const BROKEN = {
  label: 'rendered-worker-1',
  files: [
    { path: '/etc/motd', contents: 'managed by mco\n' }, // applied first: must not leak into the booted tree
    { path: '/home/core/test/test', contents: 'hello\n', mode: '0644' },
  ],
};

const CORRECTED = {
  label: 'rendered-worker-2',
  remove: ['/home/core/test'],
  files: [
    { path: '/etc/motd', contents: 'managed by mco\n' },
    { path: '/home/core/test/test', contents: 'hello\n', mode: '0644' },
  ],
};

describe('machine-config-daemon deadlock replay', () => {
  let t: TempSysroot;
  afterEach(() => t?.cleanup());

  it('rejects the update naming the path and ENOTDIR, leaves the booted tree byte for byte, then takes the corrected one', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    const booted = t.sysroot.treePath('0001');
    const before = hashTree(booted);

    const err = await t.sysroot.stage(BROKEN).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'APPLY_FAILED', errno: 'ENOTDIR', path: 'home/core/test/test', isRejection: true });
    expect(String((err as Error).message)).toMatch(/home\/core\/test\/test.*home\/core\/test is not a directory \(ENOTDIR\)/);
    expect(exitCodeFor(err)).toBe(3);

    // Nothing the node runs changed.
    expect(hashTree(booted)).toBe(before);
    expect(fs.readFileSync(path.join(t.dir, 'current', 'etc', 'motd'), 'utf8')).toBe('welcome\n');
    const st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0001', staged: null, pendingReboot: false });
    expect(st.lastFailure).toMatchObject({ id: '0002', label: 'rendered-worker-1', phase: 'apply', code: 'APPLY_FAILED', path: 'home/core/test/test' });
    expect(st.lastFailure!.reason).toContain('ENOTDIR');
    // The failed tree is kept for diagnosis, and listed as failed.
    expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ failed: true, label: 'rendered-worker-1' });
    expect(fs.readFileSync(path.join(t.sysroot.treePath('0002'), 'home/core/test'), 'utf8')).toBe('a regular file\n');

    // The corrected update: no manual step (no cleanup, no uncordon) in between.
    const ok = await t.sysroot.stage(CORRECTED);
    expect(ok).toMatchObject({ id: '0003', label: 'rendered-worker-2' });
    expect(t.sysroot.status()).toMatchObject({ staged: '0003', lastFailure: null });
    expect(t.sysroot.status().deployments.map((d) => d.id)).toEqual(['0003', '0001']);
    expect(hashTree(booted)).toBe(before);

    const r = await reboot(t.sysroot);
    expect(r.finalize).toMatchObject({ finalized: true, id: '0003', previous: '0001' });
    expect(r.boot.event).toMatchObject({ kind: 'booted', id: '0003' });
    await t.sysroot.markGood();
    expect(t.sysroot.status()).toMatchObject({ booted: '0003', current: '0003', rollback: '0001', pendingReboot: false });
    expect(fs.readFileSync(path.join(t.dir, 'current', 'home/core/test/test'), 'utf8')).toBe('hello\n');
    expect(fs.readFileSync(path.join(t.dir, 'current', 'etc/motd'), 'utf8')).toBe('managed by mco\n');
    expect((await t.sysroot.verify()).drift).toEqual([]);
    // The old root is still there, untouched, as the rollback.
    expect(hashTree(booted)).toBe(before);
  });
});
