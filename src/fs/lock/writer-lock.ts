import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { StagedrootError, errnoOf } from '../../errors.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { randomHex } from '../core/random-hex.js';

/**
 * The sysroot's writer lock: a directory `lock/` holding `owner.json`, taken by
 * renaming a fully prepared directory into place (atomic, and it can never be seen
 * without its owner). A lock whose owner process is gone (SIGKILL, power loss) is
 * stale: it is broken under a second, short-lived mutex (`lock.break/`, made the same
 * way, with its own owner) so that two processes can never both break the same lock and
 * both believe they hold it. A mutex left by a breaker that died is itself stale as soon
 * as its owner is gone.
 */
const ownerSchema = z.object({
  pid: z.number().int(),
  start: z.string().nullable(),
  /** The kernel's boot id: a lock from an earlier boot is stale whatever its pid (power loss). */
  boot: z.string().nullable().default(null),
  token: z.string(),
  operation: z.string(),
  since: z.string(),
});
type Owner = z.infer<typeof ownerSchema>;

export interface LockHandle {
  readonly owner: Owner;
  release(): void;
}

export interface LockOptions {
  /** Seconds to wait for another writer; 0 (the default) fails at once with BUSY. Checked by the caller (Sysroot). */
  waitSeconds?: number;
  operation?: string;
  faults?: FaultHook;
  /** The lock directory's name in `sysroot` (default `lock`; its break mutex is `NAME.break`): another lock made the same way (a blob directory's). */
  name?: string;
  /** What a BUSY error says is busy (default `The sysroot DIR`). */
  what?: string;
}

const BREAK_MUTEX_STALE_MS = 10_000;

export async function acquireLock(sysroot: string, opts: LockOptions = {}): Promise<LockHandle> {
  const faults = opts.faults ?? noFaults;
  const name = opts.name ?? 'lock';
  const lockDir = path.join(sysroot, name);
  const wait = opts.waitSeconds ?? 0;
  const deadline = Date.now() + wait * 1000;
  const owner = newOwner(opts.operation ?? 'write');
  for (;;) {
    if (tryTake(sysroot, lockDir, owner, faults)) {
      return { owner, release: () => release(sysroot, lockDir, owner, faults) };
    }
    const holder = readOwner(lockDir);
    if (holder === 'gone') continue;
    // A live holder blocks; a stale lock is broken, unless another live process is breaking it.
    const blocker = holder !== null && isAlive(holder) ? holder : breakStale(sysroot, lockDir, `${name}.break`, holder, faults);
    if (blocker === null) continue;
    if (Date.now() >= deadline) {
      const who = blocker === 'unknown'
        ? 'another process is taking over a stale lock'
        : `process ${blocker.pid} holds the lock for "${blocker.operation}" since ${blocker.since}`;
      throw new StagedrootError(
        'BUSY',
        `${opts.what ?? `The sysroot ${sysroot}`} is busy: ${who}` + (opts.waitSeconds ? ` (waited ${opts.waitSeconds}s)` : ' (use --wait SECONDS to wait for it)'),
        { path: lockDir, value: blocker },
      );
    }
    await pause();
  }
}

function pause(): Promise<void> {
  return new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
}

/** Creates `lockDir` holding `owner.json` by renaming a prepared temp dir into place; false when it is taken. */
function tryTake(sysroot: string, lockDir: string, owner: Owner, faults: FaultHook): boolean {
  const tmp = path.join(sysroot, `.lock-new-${process.pid}-${randomHex(4)}`);
  fs.mkdirSync(tmp, { mode: 0o700 });
  faults.afterMutation('mkdir', tmp);
  fs.writeFileSync(path.join(tmp, 'owner.json'), JSON.stringify(owner));
  faults.afterMutation('write', tmp);
  try {
    fs.renameSync(tmp, lockDir);
    faults.afterMutation('rename', lockDir);
    return true;
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    const e = errnoOf(err);
    if (e === 'ENOTEMPTY' || e === 'EEXIST') return false;
    throw new StagedrootError('IO', `Cannot take the lock ${lockDir}: ${(err as Error).message}`, { path: lockDir, cause: err });
  }
}

function newOwner(operation: string): Owner {
  return { pid: process.pid, start: processStart(process.pid), boot: bootId(), token: randomHex(8), operation, since: new Date().toISOString() };
}

/** The current holder; null when unreadable; 'gone' when the lock disappeared meanwhile. */
function readOwner(lockDir: string): Owner | null | 'gone' {
  let text: string;
  try {
    text = fs.readFileSync(path.join(lockDir, 'owner.json'), 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return fs.existsSync(lockDir) ? null : 'gone';
    return null;
  }
  try {
    const r = ownerSchema.safeParse(JSON.parse(text));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

function isAlive(o: Owner): boolean {
  // Early boot is nearly deterministic: the same pid may be alive again after a power
  // loss. A lock taken during another boot is stale.
  const boot = bootId();
  if (o.boot !== null && boot !== null && o.boot !== boot) return false;
  try {
    process.kill(o.pid, 0);
  } catch (err) {
    if (errnoOf(err) !== 'EPERM') return false;
  }
  // A reused pid is a different process: compare start times where /proc has them.
  const now = processStart(o.pid);
  return o.start === null || now === null || now === o.start;
}

/**
 * Breaks a stale lock under the break mutex. Returns null when the caller may retry at
 * once, or who blocks it: the live process breaking the lock now ('unknown' when the
 * mutex's owner cannot be read yet).
 */
function breakStale(sysroot: string, lockDir: string, mutexName: string, seen: Owner | null, faults: FaultHook): Owner | 'unknown' | null {
  const mutex = path.join(sysroot, mutexName);
  const me = newOwner('break a stale lock');
  if (!tryTake(sysroot, mutex, me, faults)) {
    const breaker = readOwner(mutex);
    if (breaker === 'gone') return null;
    // A breaker that died (SIGKILL between taking and dropping the mutex) left it behind.
    // An unreadable owner (its write lost to a power cut) is judged by the mutex's age.
    if (breaker === null ? ageMs(mutex) <= BREAK_MUTEX_STALE_MS : isAlive(breaker)) return breaker ?? 'unknown';
    removeOwned(sysroot, mutex, breaker, faults);
    return null;
  }
  try {
    const again = readOwner(lockDir);
    const same = again !== 'gone' && (again === null ? seen === null : seen !== null && again.token === seen.token);
    if (same && (again === null || !isAlive(again))) removeOwned(sysroot, lockDir, again, faults);
  } finally {
    release(sysroot, mutex, me, faults);
  }
  return null;
}

/**
 * Removes a lock-style dir whose owner was seen as `seen`: renamed aside first, then
 * checked, so that a dir taken afresh by a live process meanwhile is put back, not lost.
 */
function removeOwned(sysroot: string, dir: string, seen: Owner | null, faults: FaultHook): void {
  const trash = path.join(sysroot, `.lock-stale-${process.pid}-${randomHex(4)}`);
  try {
    fs.renameSync(dir, trash);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw err;
  }
  faults.afterMutation('rename', trash);
  const moved = readOwner(trash);
  const sameOne = moved === 'gone' || (moved === null ? seen === null : seen !== null && moved.token === seen.token);
  if (!sameOne) {
    try {
      fs.renameSync(trash, dir);
      faults.afterMutation('rename', dir);
      return;
    } catch {
      // Taken again meanwhile: the dir moved aside is dropped like a stale one.
    }
  }
  fs.rmSync(trash, { recursive: true, force: true });
  faults.afterMutation('rm', trash);
}

function ageMs(p: string): number {
  try {
    return Date.now() - fs.statSync(p).mtimeMs;
  } catch {
    return 0;
  }
}

function release(sysroot: string, lockDir: string, owner: Owner, faults: FaultHook): void {
  const current = readOwner(lockDir);
  if (current === null || current === 'gone' || current.token !== owner.token) return;
  // Rename first: removing in place would leave an empty lock dir another process could take.
  const trash = path.join(sysroot, `.lock-old-${process.pid}-${randomHex(4)}`);
  fs.renameSync(lockDir, trash);
  faults.afterMutation('rename', trash);
  removeLockDir(trash);
}

/**
 * Removes a lock dir moved aside: its owner.json, then the dir (fs.rmSync's recursive walk
 * loads a module of its own, a CLI start's last cost); anything else in it, recursively.
 */
function removeLockDir(dir: string): void {
  try {
    fs.unlinkSync(path.join(dir, 'owner.json'));
    fs.rmdirSync(dir);
  } catch {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

let cachedBootId: string | null | undefined;
/** The kernel's id of this boot, or null off Linux. */
function bootId(): string | null {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      cachedBootId = null;
    }
  }
  return cachedBootId;
}

/** The start time of a process (field 22 of /proc/PID/stat), or null off Linux. */
function processStart(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/**
 * Removes the lock's own leftovers (from a writer killed while taking, breaking or
 * dropping it): temp dirs of dead processes, and a break mutex whose owner is dead.
 * Called with the lock held.
 */
export function cleanLockLeftovers(sysroot: string, faults: FaultHook = noFaults): void {
  for (const name of fs.readdirSync(sysroot)) {
    if (/^\.lock-(new|stale|old)-(\d+)-/.test(name)) {
      const pid = Number(name.split('-')[2]);
      if (pid === process.pid || pidAlive(pid)) continue;
      fs.rmSync(path.join(sysroot, name), { recursive: true, force: true });
      faults.afterMutation('rm', path.join(sysroot, name));
    }
  }
  const mutex = path.join(sysroot, 'lock.break');
  const breaker = readOwner(mutex);
  if (breaker !== 'gone' && (breaker === null ? ageMs(mutex) > BREAK_MUTEX_STALE_MS : !isAlive(breaker))) {
    removeOwned(sysroot, mutex, breaker, faults);
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoOf(err) === 'EPERM';
  }
}
