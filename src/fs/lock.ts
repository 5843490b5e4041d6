import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { StagedrootError, errnoOf } from '../errors.js';
import { noFaults, type FaultHook } from './faults.js';

/**
 * The sysroot's writer lock: a directory `lock/` holding `owner.json`, taken by
 * renaming a fully prepared directory into place (atomic, and it can never be seen
 * without its owner). A lock whose owner process is gone (SIGKILL, power loss) is
 * stale: it is broken under a second, short-lived mutex (`lock.break/`) so that two
 * processes can never both break the same lock and both believe they hold it.
 */
const ownerSchema = z.object({
  pid: z.number().int(),
  start: z.string().nullable(),
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
  /** Seconds to wait for another writer; 0 (the default) fails at once with BUSY. */
  waitSeconds?: number;
  operation?: string;
  faults?: FaultHook;
}

const BREAK_MUTEX_STALE_MS = 10_000;

export async function acquireLock(sysroot: string, opts: LockOptions = {}): Promise<LockHandle> {
  const faults = opts.faults ?? noFaults;
  const lockDir = path.join(sysroot, 'lock');
  const deadline = Date.now() + Math.max(0, opts.waitSeconds ?? 0) * 1000;
  const owner: Owner = {
    pid: process.pid,
    start: processStart(process.pid),
    token: randomBytes(8).toString('hex'),
    operation: opts.operation ?? 'write',
    since: new Date().toISOString(),
  };
  for (;;) {
    if (tryTake(sysroot, lockDir, owner, faults)) {
      return { owner, release: () => release(sysroot, lockDir, owner, faults) };
    }
    const holder = readOwner(lockDir);
    if (holder === 'gone') continue;
    if (holder === null || !isAlive(holder)) {
      breakStale(sysroot, lockDir, holder, faults);
      continue;
    }
    if (Date.now() >= deadline) {
      throw new StagedrootError(
        'BUSY',
        `The sysroot ${sysroot} is busy: process ${holder.pid} holds the lock for "${holder.operation}" since ${holder.since}` +
          (opts.waitSeconds ? ` (waited ${opts.waitSeconds}s)` : ' (use --wait SECONDS to wait for it)'),
        { path: lockDir, value: holder },
      );
    }
    await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
  }
}

function tryTake(sysroot: string, lockDir: string, owner: Owner, faults: FaultHook): boolean {
  const tmp = path.join(sysroot, `.lock-new-${process.pid}-${randomBytes(4).toString('hex')}`);
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
  try {
    process.kill(o.pid, 0);
  } catch (err) {
    if (errnoOf(err) !== 'EPERM') return false;
  }
  // A reused pid is a different process: compare start times where /proc has them.
  const now = processStart(o.pid);
  return o.start === null || now === null || now === o.start;
}

function breakStale(sysroot: string, lockDir: string, seen: Owner | null, faults: FaultHook): void {
  const mutex = path.join(sysroot, 'lock.break');
  try {
    fs.mkdirSync(mutex);
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw err;
    try {
      if (Date.now() - fs.statSync(mutex).mtimeMs > BREAK_MUTEX_STALE_MS) fs.rmdirSync(mutex);
    } catch {
      // another process removed it
    }
    return;
  }
  try {
    const again = readOwner(lockDir);
    const same = again !== 'gone' && (again === null ? seen === null : seen !== null && again.token === seen.token);
    if (same && (again === null || !isAlive(again))) {
      const trash = path.join(sysroot, `.lock-stale-${process.pid}-${randomBytes(4).toString('hex')}`);
      try {
        fs.renameSync(lockDir, trash);
        faults.afterMutation('rename', trash);
        fs.rmSync(trash, { recursive: true, force: true });
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT') throw err;
      }
    }
  } finally {
    fs.rmdirSync(mutex);
  }
}

function release(sysroot: string, lockDir: string, owner: Owner, faults: FaultHook): void {
  const current = readOwner(lockDir);
  if (current === null || current === 'gone' || current.token !== owner.token) return;
  // Rename first: removing in place would leave an empty lock dir another process could take.
  const trash = path.join(sysroot, `.lock-old-${process.pid}-${randomBytes(4).toString('hex')}`);
  fs.renameSync(lockDir, trash);
  faults.afterMutation('rename', trash);
  fs.rmSync(trash, { recursive: true, force: true });
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

/** Removes the lock's own temp leftovers (from a writer killed while taking or dropping it). */
export function cleanLockLeftovers(sysroot: string): void {
  for (const name of fs.readdirSync(sysroot)) {
    if (/^\.lock-(new|stale|old)-(\d+)-/.test(name)) {
      const pid = Number(name.split('-')[2]);
      if (pid === process.pid || pidAlive(pid)) continue;
      fs.rmSync(path.join(sysroot, name), { recursive: true, force: true });
    }
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
