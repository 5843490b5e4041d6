import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../src/context.js';
import { parseBootEntry } from '../../src/state/boot-entries.js';
import type { BaseState } from '../../src/state/schema.js';
import { syncBootEntries } from '../../src/store/boot-entries.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
let boot: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (boot) fs.rmSync(boot, { recursive: true, force: true });
  t = boot = undefined;
});

const KERNEL_TREE = {
  'etc/os-release': 'ID=test\n',
  'usr/lib/modules/6.1.0-1/vmlinuz': 'kernel 6.1.0-1\n',
  'usr/lib/modules/6.1.0-1/initramfs.img': 'initramfs 6.1.0-1\n',
};

async function withBootDir(kernelArguments = ['root=LABEL=root', 'rw', 'stagedroot=/sysroot']): Promise<TempSysroot> {
  boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-dir-'));
  t = await tempSysroot({ tree: KERNEL_TREE, bootDir: boot, kernelArguments });
  return t;
}

/** The entries the bootloader sees (through the `loader` symlink), parsed, default first. */
function entries(): Record<string, string>[] {
  const dir = path.join(boot!, 'loader', 'entries');
  const parsed: Record<string, string>[] = fs.readdirSync(dir).map((f) => ({ file: f, ...parseBootEntry(fs.readFileSync(path.join(dir, f), 'utf8')) }));
  // Every file an entry names exists in the boot directory.
  for (const e of parsed) for (const k of ['linux', 'initrd'] as const) if (e[k]) expect(fs.existsSync(path.join(boot!, e[k])), `${e.file}: ${k} ${e[k]}`).toBe(true);
  return parsed.sort((a, b) => Number(b.version) - Number(a.version));
}

describe('Boot Loader Specification entries in --boot-dir', () => {
  it('init writes the first entry; finalize makes the new deployment the default and the old one the next; kernels shared by checksum', async () => {
    await withBootDir();
    expect(fs.readlinkSync(path.join(boot!, 'loader'))).toMatch(/^loader\.[01]$/);
    expect(entries().map((e) => [e.file, e.version])).toEqual([['stagedroot-0001.conf', '1']]);
    await t!.sysroot.stage({ label: 'web-2', files: [{ path: '/etc/motd', contents: 'hi\n' }], kernelArguments: { shouldExist: ['quiet'] } });
    await t!.sysroot.finalize();
    const [first, second] = entries();
    expect(first).toMatchObject({ file: 'stagedroot-0002.conf', title: 'web-2 (stagedroot 0002)', options: 'root=LABEL=root rw stagedroot=/sysroot quiet' });
    expect(second).toMatchObject({ file: 'stagedroot-0001.conf', options: 'root=LABEL=root rw stagedroot=/sysroot' });
    // Same kernel and initramfs: one copy.
    expect(first!.linux).toBe(second!.linux);
    expect(first!.linux).toMatch(/^\/stagedroot\/[0-9a-f]{64}\/vmlinuz-6\.1\.0-1$/);
    expect(fs.readdirSync(path.join(boot!, 'stagedroot'))).toHaveLength(1);
    expect(fs.readFileSync(path.join(boot!, first!.initrd!), 'utf8')).toBe('initramfs 6.1.0-1\n');
  });

  it('a new kernel gets its own copy; rollback swaps the order; an unused kernel is removed', async () => {
    await withBootDir();
    await t!.sysroot.stage({ label: 'k2', files: [{ path: '/usr/lib/modules/6.2.0-1/vmlinuz', contents: 'kernel 6.2.0-1\n' }, { path: '/usr/lib/modules/6.2.0-1/initramfs.img', contents: 'initramfs 6.2.0-1\n' }] });
    await t!.sysroot.finalize();
    await t!.sysroot.boot({ runDir: '/nonexistent' });
    await t!.sysroot.markGood();
    let e = entries();
    expect(e.map((x) => x.file)).toEqual(['stagedroot-0002.conf', 'stagedroot-0001.conf']);
    expect(e[0]!.linux).toMatch(/vmlinuz-6\.2\.0-1$/);
    expect(fs.readdirSync(path.join(boot!, 'stagedroot'))).toHaveLength(2);
    await t!.sysroot.rollback();
    e = entries();
    expect(e.map((x) => x.file)).toEqual(['stagedroot-0001.conf', 'stagedroot-0002.conf']);
    // A third deployment on the new kernel: 0001's old kernel has no entry left.
    await t!.sysroot.rollback();
    await t!.sysroot.stage({ label: 'k3', files: [{ path: '/etc/motd', contents: '3\n' }] });
    await t!.sysroot.finalize();
    e = entries();
    expect(e.map((x) => x.file)).toEqual(['stagedroot-0003.conf', 'stagedroot-0002.conf']);
    expect(fs.readdirSync(path.join(boot!, 'stagedroot'))).toHaveLength(1);
  });

  it('a crash at any point of the swap leaves the old set or the new set, never a mix; the next sync completes it', async () => {
    await withBootDir();
    await t!.sysroot.stage({ label: 'k2', files: [{ path: '/usr/lib/modules/6.2.0-1/vmlinuz', contents: 'kernel 6.2.0-1\n' }] });
    const before: BaseState = t!.sysroot.state();
    const oldSet = JSON.stringify(entries());
    // The state after finalize, written by hand so that only the entries are at stake.
    const after: BaseState = { ...before, current: before.staged!, staged: null, rollback: before.current };
    let points = 0;
    for (let n = 1; ; n++) {
      let count = 0;
      const ctx = makeContext(t!.dir, { faults: { afterMutation() { if (++count === n) throw new Error('crash'); } } });
      let crashed = false;
      try {
        syncBootEntries(ctx, after);
      } catch (err) {
        if ((err as Error).message !== 'crash' && !String((err as Error).cause).includes('crash')) throw err;
        crashed = true;
      }
      const seen = JSON.stringify(entries());
      const newSet = (() => {
        syncBootEntries(makeContext(t!.dir), after);
        return JSON.stringify(entries());
      })();
      expect([oldSet, newSet], `crash point ${n}`).toContain(seen);
      // Back to the old set for the next crash point.
      syncBootEntries(makeContext(t!.dir), before);
      expect(JSON.stringify(entries())).toBe(oldSet);
      if (!crashed) break;
      points++;
    }
    expect(points).toBeGreaterThan(4);
  });
});
