import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hashTree, reboot, tempSysroot, type TempSysroot } from '../src/testing/index.js';

/** A deployment found bad keeps running until the reboot; nothing may pull it (or its tree) out from under it. */
describe('after mark-bad and automatic fallback', () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());

  async function bootBadUpdate(): Promise<TempSysroot> {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=t\n', 'etc/a': 'a\n' } });
    await t.sysroot.stage({ files: [{ path: '/etc/good', contents: 'g\n' }] });
    await reboot(t.sysroot);
    await t.sysroot.markGood(); // 0002 good
    await t.sysroot.stage({ files: [{ path: '/etc/bad', contents: 'b\n' }] });
    await reboot(t.sysroot); // 0003 booted, under assessment
    return t;
  }

  it('a stage after mark-bad keeps the booted (bad) tree and builds from the good current one', async () => {
    const { sysroot } = await bootBadUpdate();
    const bootedTree = sysroot.treePath('0003');
    const before = hashTree(bootedTree);
    await sysroot.markBad('health check failed');
    const r = await sysroot.stage({ files: [{ path: '/etc/fixed', contents: 'f\n' }] });
    expect(hashTree(bootedTree)).toBe(before);
    expect(sysroot.status()).toMatchObject({ booted: '0003', current: '0002', staged: r.id });
    // Built from 0002: the bad update's file is not carried over.
    expect(fs.existsSync(path.join(r.path, 'etc/bad'))).toBe(false);
    expect(fs.readFileSync(path.join(r.path, 'etc/good'), 'utf8')).toBe('g\n');
    // A failed stage does not remove it either.
    await expect(sysroot.stage({ files: [{ path: '/etc/a/x', contents: 'x' }] })).rejects.toMatchObject({ code: 'APPLY_FAILED' });
    expect(hashTree(bootedTree)).toBe(before);
    await sysroot.markGood().catch(() => undefined); // the booted record still exists
    expect(sysroot.status().deployments.some((d) => d.id === '0003')).toBe(true);
  });

  it('mark-bad drops a deployment staged on top of the bad one, so the next shutdown cannot install it', async () => {
    const { sysroot } = await bootBadUpdate();
    await sysroot.stage({ files: [{ path: '/etc/more', contents: 'm\n' }] }); // 0004, parent 0003
    await sysroot.markBad('health check failed');
    expect(sysroot.status()).toMatchObject({ current: '0002', staged: null });
    const r = await reboot(sysroot);
    expect(r.finalize).toMatchObject({ finalized: false, reason: 'nothing-staged' });
    expect(r.boot.event).toMatchObject({ kind: 'booted', id: '0002' });
    expect(fs.existsSync(path.join(sysroot.treePath('0002'), 'etc/bad'))).toBe(false);
  });

  it('an automatic fallback drops a deployment staged on top of the one that used up its tries', async () => {
    const { sysroot } = await bootBadUpdate(); // boot 1 of 3
    await sysroot.boot();
    await sysroot.boot(); // tries used up
    await sysroot.stage({ files: [{ path: '/etc/more', contents: 'm\n' }] }); // parent 0003
    const r = await sysroot.boot();
    expect(r.event).toMatchObject({ kind: 'fell-back', from: '0003', to: '0002' });
    expect(sysroot.status()).toMatchObject({ booted: '0002', current: '0002', staged: null, lastFailure: { id: '0003', phase: 'boot' } });
  });
});

describe('stage() input', () => {
  it('names a wrong kind of input as a usage error', async () => {
    const t = await tempSysroot();
    try {
      await expect(t.sysroot.stage(42 as unknown as string)).rejects.toMatchObject({ code: 'USAGE', option: 'source' });
      await expect(t.sysroot.stage([] as unknown as string)).rejects.toMatchObject({ code: 'USAGE', message: expect.stringContaining('an array') });
    } finally {
      t.cleanup();
    }
  });
});

describe('deployment ids', () => {
  it('are never reused, even after the newest one is discarded', async () => {
    const t = await tempSysroot();
    try {
      const a = await t.sysroot.stage({ files: [{ path: '/etc/a', contents: 'a' }] });
      await t.sysroot.discardStaged();
      const b = await t.sysroot.stage({ files: [{ path: '/etc/b', contents: 'b' }] });
      expect(Number(b.id)).toBeGreaterThan(Number(a.id));
      await expect(t.sysroot.stage({ files: [{ path: '/x', contents: '1' }, { path: '/x/y', contents: '2' }] })).rejects.toMatchObject({ code: 'APPLY_FAILED' });
      await t.sysroot.discardStaged();
      const c = await t.sysroot.stage({ files: [{ path: '/etc/c', contents: 'c' }] });
      expect(Number(c.id)).toBeGreaterThan(Number(b.id) + 1);
    } finally {
      t.cleanup();
    }
  });
});
