import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseBootRecord } from '../../src/boot/boot-record.js';
import { Sysroot } from '../../src/sysroot.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { expectBootFiles, readState } from '../helpers/invariants.js';
import { bootRecords } from '../helpers/boot.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});
const records = bootRecords('/');

/**
 * What stagedroot-prepare-root does to the sysroot's files at each boot (the real script
 * is run in test/initramfs/): use one try of the current deployment, or boot the fallback
 * when none are left, and record what it booted. Returns where `boot` finds the record.
 */
function initramfsBoot(dir: string): { runDir: string; rootDir: string; id: string } {
  const current = /^deploy\/(\d+)\/tree$/.exec(fs.readlinkSync(path.join(dir, 'current')))![1]!;
  const triesFile = path.join(dir, 'boot-tries', current);
  const lines = [];
  let id = current;
  if (fs.existsSync(triesFile)) {
    const left = Number(fs.readFileSync(triesFile, 'utf8'));
    if (left > 0) {
      fs.writeFileSync(`${triesFile}.tmp`, `${left - 1}\n`);
      fs.renameSync(`${triesFile}.tmp`, triesFile);
      lines.push(`tries-left=${left - 1}`);
    } else {
      id = /^deploy\/(\d+)\/tree$/.exec(fs.readlinkSync(path.join(dir, 'fallback')))![1]!;
      lines.push(`fell-back-from=${current}`);
    }
  }
  return { ...records.record(dir, id, lines), id };
}

describe('boot counting shared with the initramfs', () => {
  it('finalize writes the tries and the fallback the initramfs reads; mark-good removes them', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/a', contents: '2\n' }] });
    expect(fs.existsSync(path.join(t.dir, 'boot-tries'))).toBe(false);
    await t.sysroot.finalize();
    expect(fs.readFileSync(path.join(t.dir, 'boot-tries/0002'), 'utf8')).toBe('3\n');
    expect(fs.readlinkSync(path.join(t.dir, 'fallback'))).toBe('deploy/0001/tree');
    // Without a record (no initramfs step) the hook counts, and the file follows.
    expect((await t.sysroot.boot({ runDir: path.join(t.dir, 'no-run') })).event).toEqual({ kind: 'booted', id: '0002', triesLeft: 2 });
    expect(fs.readFileSync(path.join(t.dir, 'boot-tries/0002'), 'utf8')).toBe('2\n');
    expectBootFiles(t.dir, readState(t.dir), 'after boot');
    await t.sysroot.markGood();
    expect(fs.readdirSync(path.join(t.dir, 'boot-tries'))).toEqual([]);
    expect(fs.existsSync(path.join(t.dir, 'fallback'))).toBe(false);
  });

  it('with a record, boot takes the count from the initramfs instead of counting again (and is idempotent)', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    const place = initramfsBoot(t.dir);
    expect(place.id).toBe('0002');
    expect((await t.sysroot.boot(place)).event).toEqual({ kind: 'booted', id: '0002', triesLeft: 2 });
    expect((await t.sysroot.boot(place)).event).toEqual({ kind: 'booted', id: '0002', triesLeft: 2 });
    expect(t.sysroot.status().deployments.find((d) => d.id === '0002')?.triesLeft).toBe(2);
    expect(fs.readFileSync(path.join(t.dir, 'boot-tries/0002'), 'utf8')).toBe('2\n');
  });

  it('a deployment that never reaches the boot hook falls back in the initramfs; the next boot hook records why', async () => {
    t = await tempSysroot({ tree: { 'etc/a': '1\n' } });
    await t.sysroot.stage({ label: 'dies-early', files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    // Three boots die before userspace: only the initramfs runs.
    for (let i = 0; i < 3; i++) expect(initramfsBoot(t.dir).id).toBe('0002');
    expect(fs.readFileSync(path.join(t.dir, 'boot-tries/0002'), 'utf8')).toBe('0\n');
    const fourth = initramfsBoot(t.dir);
    expect(fourth.id).toBe('0001');
    const r = await t.sysroot.boot(fourth);
    expect(r.event).toMatchObject({ kind: 'fell-back', from: '0002', to: '0001' });
    const st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0001', pendingReboot: false });
    expect(st.lastFailure).toMatchObject({ id: '0002', label: 'dies-early', phase: 'boot' });
    expect(st.lastFailure?.reason).toBe('deployment 0002 did not reach the boot hook in 3 tries (counted by the initramfs)');
    expect(fs.readdirSync(path.join(t.dir, 'boot-tries'))).toEqual([]);
    expect(fs.existsSync(path.join(t.dir, 'fallback'))).toBe(false);
  });

  it('one that reached the boot hook but was never marked good says so', async () => {
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    await t.sysroot.boot(initramfsBoot(t.dir));
    initramfsBoot(t.dir);
    initramfsBoot(t.dir);
    await t.sysroot.boot(initramfsBoot(t.dir));
    expect(t.sysroot.status().lastFailure?.reason).toBe('deployment 0002 used all 3 boot tries without being marked good (counted by the initramfs)');
  });

  it('a record that is not about this sysroot\'s running root is ignored, loudly', async () => {
    const warnings: string[] = [];
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    const place = initramfsBoot(t.dir);
    const s = await Sysroot.open(t.dir, { onWarning: (m) => warnings.push(m) });
    const r = await s.boot({ runDir: place.runDir, rootDir: os.tmpdir() });
    // Counted by the hook itself (3 → 2), not taken from the record.
    expect(r.event).toEqual({ kind: 'booted', id: '0002', triesLeft: 2 });
    expect(warnings.join('\n')).toContain('names deployment 0002, but the running root is not its tree');
  });

  it('mark-bad and recovery leave no tries or fallback behind', async () => {
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ files: [{ path: '/etc/a', contents: '2\n' }] });
    await t.sysroot.finalize();
    await t.sysroot.boot(initramfsBoot(t.dir));
    await t.sysroot.markBad('health');
    expectBootFiles(t.dir, readState(t.dir), 'after mark-bad');
    expect(fs.existsSync(path.join(t.dir, 'fallback'))).toBe(false);
    // Leftovers of a crash between writing the next state's files and moving the pointer.
    fs.mkdirSync(path.join(t.dir, 'boot-tries'), { recursive: true });
    fs.writeFileSync(path.join(t.dir, 'boot-tries/0002'), '3\n');
    fs.symlinkSync('deploy/0001/tree', path.join(t.dir, 'fallback'));
    await Sysroot.open(t.dir);
    expectBootFiles(t.dir, readState(t.dir), 'after recovery');
    expect(fs.readdirSync(path.join(t.dir, 'boot-tries'))).toEqual([]);
  });
});

describe('parseBootRecord', () => {
  it('reads what prepare-root writes and refuses what it never writes', () => {
    expect(parseBootRecord('id=0003\nsysroot=/\ntries-left=2\n')).toEqual({ id: '0003', triesLeft: 2, fellBackFrom: null });
    expect(parseBootRecord('id=0001\nsysroot=/sr\nfell-back-from=0004\n')).toEqual({ id: '0001', triesLeft: null, fellBackFrom: '0004' });
    expect(parseBootRecord('id=../x\n')).toBeNull();
    expect(parseBootRecord('id=0003\ntries-left=-1\n')).toBeNull();
    expect(parseBootRecord('')).toBeNull();
  });
});
