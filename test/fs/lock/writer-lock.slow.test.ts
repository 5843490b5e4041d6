import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FaultHook } from '../../../src/fs/core/faults.js';
import { acquireLock } from '../../../src/fs/lock/writer-lock.js';
import { Sysroot } from '../../../src/sysroot.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { crashAt, exited, holdLock, releaseLock, requireDist } from '../../helpers/crash.js';
import { motdUpdate } from '../../helpers/trees.js';

/** Everything the lock may leave in the sysroot's top directory. */
function lockLeftovers(dir: string): string[] {
  return fs.readdirSync(dir).filter((n) => n === 'lock' || n === 'lock.break' || n.startsWith('.lock-'));
}

/** The pid of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!;
}

function writeOwned(dir: string, pid: number, operation: string): void {
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'owner.json'), JSON.stringify({ pid, start: null, token: `t${pid}`, operation, since: new Date().toISOString() }));
}

/** Counts the tries to take the lock or its break mutex (each prepares a .lock-new-* dir), through the fault hook. */
function lockTries(): { faults: FaultHook; count: () => number } {
  let n = 0;
  const faults: FaultHook = { afterMutation: (op, p) => void (op === 'mkdir' && path.basename(p).startsWith('.lock-new-') && n++) };
  return { faults, count: () => n };
}

describe('the sysroot writer lock', () => {
  let t: TempSysroot;
  const children: { kill(sig?: NodeJS.Signals): boolean }[] = [];

  beforeAll(() => requireDist());
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    t?.cleanup();
  });

  it('gives a second writer a busy error naming the process that holds it', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const holder = await holdLock(t.dir, 60_000);
    children.push(holder);
    const err = await t.sysroot.stage(motdUpdate('A')).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUSY', path: path.join(t.dir, 'lock') });
    expect(String((err as Error).message)).toContain(`process ${holder.pid} holds the lock for "test-holder"`);
    expect(String((err as Error).message)).toContain('--wait');
    // Readers never block: open (recovery left to the holder) and status still work.
    const reader = await Sysroot.open(t.dir);
    expect(reader.status().current).toBe('0001');
    expect(reader.recovery).toEqual([]);
  });

  it('treats a lock taken during another boot as stale, even when its pid is alive now', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    // A power loss leaves the lock; after the reboot the same pid may well be running again.
    const lockDir = path.join(t.dir, 'lock');
    fs.mkdirSync(lockDir);
    const self = fs.readFileSync(`/proc/${process.pid}/stat`, 'utf8');
    const start = self.slice(self.lastIndexOf(')') + 2).split(' ')[19];
    fs.writeFileSync(path.join(lockDir, 'owner.json'), JSON.stringify({ pid: process.pid, start, boot: 'an-earlier-boot', token: 't', operation: 'finalize', since: new Date(0).toISOString() }));
    await expect(t.sysroot.stage(motdUpdate('A'))).resolves.toMatchObject({ id: '0002' });
    // The same record from this boot is a live holder.
    const boot = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    fs.mkdirSync(lockDir);
    fs.writeFileSync(path.join(lockDir, 'owner.json'), JSON.stringify({ pid: process.pid, start, boot, token: 't', operation: 'finalize', since: new Date(0).toISOString() }));
    await expect(t.sysroot.finalize()).rejects.toMatchObject({ code: 'BUSY' });
    fs.rmSync(lockDir, { recursive: true });
  });

  it('refuses a waitSeconds that is not a non-negative number when the sysroot is opened, not at the first write', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const opened = (waitSeconds: unknown) => Sysroot.open(t.dir, { waitSeconds: waitSeconds as number });
    await expect(opened(Number.NaN)).rejects.toMatchObject({ code: 'USAGE', option: 'waitSeconds', message: 'Expected the `waitSeconds` option to be a non-negative number of seconds, got `NaN` (number)' });
    await expect(opened(-1)).rejects.toMatchObject({ code: 'USAGE', message: 'Expected the `waitSeconds` option to be a non-negative number of seconds, got `-1` (number)' });
    await expect(opened('5')).rejects.toMatchObject({ code: 'USAGE', message: 'Expected the `waitSeconds` option to be a non-negative number of seconds, got `5` (string)' });
    await expect(opened(Infinity)).rejects.toMatchObject({ code: 'USAGE' });
    await expect(Sysroot.init(path.join(t.scratch, 'other'), { waitSeconds: -1 })).rejects.toMatchObject({ code: 'USAGE', option: 'waitSeconds' });
    expect(fs.existsSync(path.join(t.scratch, 'other'))).toBe(false);
    await expect(opened(0.5)).resolves.toBeInstanceOf(Sysroot);
  });

  it('waits for the holder with waitSeconds, and gives up after them', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const brief = await holdLock(t.dir, 'until-released');
    children.push(brief);
    // The waiter's tries to take the lock, seen through the fault hook (each prepares a .lock-new-* dir).
    const order: string[] = [];
    let tried!: () => void;
    const triedTwice = new Promise<void>((r) => (tried = r));
    let tries = 0;
    const faults = { afterMutation: (op: string, p: string) => void (op === 'mkdir' && path.basename(p).startsWith('.lock-new-') && ++tries === 2 && tried()) };
    const waiting = await Sysroot.open(t.dir, { waitSeconds: 20, faults });
    const staging = waiting.stage(motdUpdate('A')).then((r) => (order.push('staged'), r));
    await triedTwice; // it found the lock taken and tried again: it is waiting, not refused
    order.push('release');
    await releaseLock(brief);
    const staged = await staging;
    expect(staged.id).toBe('0002');
    expect(order).toEqual(['release', 'staged']);
    expect(await exited(brief)).toBeNull(); // it released and exited normally

    const long = await holdLock(t.dir, 60_000);
    children.push(long);
    const t1 = Date.now();
    const err = await acquireLock(t.dir, { waitSeconds: 0.4 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUSY' });
    expect(String((err as Error).message)).toContain('(waited 0.4s)');
    expect(Date.now() - t1).toBeGreaterThanOrEqual(400);
  });

  it('breaks the stale lock of a SIGKILLed holder', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const holder = await holdLock(t.dir, 60_000);
    holder.kill('SIGKILL');
    expect(await exited(holder)).toBe('SIGKILL');
    expect(fs.existsSync(path.join(t.dir, 'lock', 'owner.json'))).toBe(true);
    const staged = await t.sysroot.stage(motdUpdate('A'));
    expect(staged.id).toBe('0002');
    expect(lockLeftovers(t.dir)).toEqual([]);
  });

  // Regression: a writer SIGKILLed while it held the break mutex left `lock.break/`
  // behind; the next writer spun in a tight loop for 10 s (ignoring waitSeconds) before
  // daring to remove it, and a plain open never removed it at all.
  it('does not stall after a writer died while breaking a stale lock', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const holder = await holdLock(t.dir, 60_000);
    holder.kill('SIGKILL');
    await exited(holder);
    crashAt(t.dir, 'open', /^rename .*\/lock\.break$/);
    expect(lockLeftovers(t.dir).sort()).toEqual(['lock', 'lock.break']);
    const tries = lockTries();
    const s = await Sysroot.open(t.dir, { faults: tries.faults });
    // Three rounds: the dead breaker's mutex removed, the stale lock broken, the lock taken
    // (a try prepares the lock's dir, one more the mutex's). The stall tried thousands of times.
    expect(tries.count()).toBeLessThanOrEqual(6);
    expect(lockLeftovers(t.dir)).toEqual([]);
    expect((await s.stage(motdUpdate('A'))).id).toBe('0002');
  });

  it('removes the break mutex of a writer that died right after breaking the lock', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const holder = await holdLock(t.dir, 60_000);
    holder.kill('SIGKILL');
    await exited(holder);
    crashAt(t.dir, 'open', /^rename .*\/\.lock-stale-/);
    expect(lockLeftovers(t.dir).filter((n) => !n.startsWith('.lock-stale-'))).toEqual(['lock.break']);
    await Sysroot.open(t.dir);
    expect(lockLeftovers(t.dir)).toEqual([]);
  });

  it('reports busy, not a spin, while a live process is breaking a stale lock', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    writeOwned(path.join(t.dir, 'lock'), deadPid(), 'stage');
    writeOwned(path.join(t.dir, 'lock.break'), process.pid, 'break a stale lock');
    const tries = lockTries();
    const err = await acquireLock(t.dir, { waitSeconds: 0.3, faults: tries.faults }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUSY' });
    expect(String((err as Error).message)).toContain(`process ${process.pid} holds the lock for "break a stale lock"`);
    // A round (two tries: the lock, the mutex) then a pause of 25 ms at least: at most 13
    // rounds in 0.3 s, fewer on a loaded machine. A spin, or waiting out the mutex's 10 s, makes far more.
    expect(tries.count()).toBeLessThanOrEqual(2 * 20);
    // Once that breaker is gone, its mutex is stale too and the lock is taken.
    fs.rmSync(path.join(t.dir, 'lock.break'), { recursive: true });
    writeOwned(path.join(t.dir, 'lock.break'), deadPid(), 'break a stale lock');
    const lock = await acquireLock(t.dir);
    expect(lock.owner.pid).toBe(process.pid);
    lock.release();
    expect(lockLeftovers(t.dir)).toEqual([]);
  });
});
