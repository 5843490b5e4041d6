/**
 * Set-up the boot and boot-entry tests share: the record prepare-root leaves for `boot`
 * (test/boot), a tree with a kernel, and the crash sweep of a boot-entry sync (test/boot/entries).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach } from 'vitest';
import { makeContext } from '../../src/context.js';
import type { BaseState } from '../../src/state/schema.js';
import { syncBootEntries } from '../../src/boot/entries/sync.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

/**
 * A stand-in for /run/stagedroot: `record(dir, id, lines)` writes what prepare-root
 * records after booting deployment `id` of sysroot `dir` (its `booted` file: `id=`,
 * `sysroot=`, then `lines`) and returns where `boot` finds it. The directory is made on
 * first use and removed after each test.
 */
export function bootRecords(sysrootArg = '/sysroot'): { record(dir: string, id: string, lines?: readonly string[]): { runDir: string; rootDir: string } } {
  let run: string | undefined;
  afterEach(() => {
    if (run) fs.rmSync(run, { recursive: true, force: true });
    run = undefined;
  });
  return {
    record(dir, id, lines = []) {
      run ??= fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-run-'));
      fs.writeFileSync(path.join(run, 'booted'), [`id=${id}`, `sysroot=${sysrootArg}`, ...lines].join('\n') + '\n');
      return { runDir: run, rootDir: path.join(dir, 'deploy', id, 'tree') };
    },
  };
}

/** A tree with one kernel and its initramfs where stagedroot finds them (usr/lib/modules/V/). */
export const KERNEL_TREE = {
  'etc/os-release': 'ID=test\n',
  'usr/lib/modules/6.1.0-1/vmlinuz': 'kernel 6.1.0-1\n',
  'usr/lib/modules/6.1.0-1/initramfs.img': 'initramfs 6.1.0-1\n',
};

/**
 * A crash at every point of the boot entries' sync to `after`: the sync of sysroot `dir`
 * is stopped at its 1st, 2nd, … write until one completes; `check(n, crashed)` runs after
 * each. Returns how many points crashed. `now`: the sync's clock.
 */
export async function crashEverySync(dir: string, after: BaseState, check: (n: number, crashed: boolean) => Promise<void> | void, now?: () => Date): Promise<number> {
  let points = 0;
  for (let n = 1; ; n++) {
    let count = 0;
    const ctx = makeContext(dir, { ...(now ? { now } : {}), faults: { afterMutation() { if (++count === n) throw new Error('crash'); } } });
    let crashed = false;
    try {
      syncBootEntries(ctx, after);
    } catch (err) {
      if ((err as Error).message !== 'crash' && !String((err as Error).cause).includes('crash')) throw err;
      crashed = true;
    }
    await check(n, crashed);
    if (!crashed) return points;
    points++;
  }
}

/** A temp sysroot on KERNEL_TREE with a boot directory of its own (a temp dir: BLS entries); `cleanup` removes both. */
export async function tempSysrootWithBootDir(): Promise<{ t: TempSysroot; boot: string; cleanup: () => void }> {
  const boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-dir-'));
  try {
    const t = await tempSysroot({ tree: KERNEL_TREE, bootDir: boot });
    return { t, boot, cleanup: () => (t.cleanup(), fs.rmSync(boot, { recursive: true, force: true })) };
  } catch (err) {
    fs.rmSync(boot, { recursive: true, force: true });
    throw err;
  }
}
