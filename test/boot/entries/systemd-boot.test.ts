/**
 * systemd-boot entries on an ESP, read back by systemd's own `bootctl list` (the ESP is a
 * tmpfs mount: bootctl wants the root of a filesystem, and SYSTEMD_RELAX_ESP_CHECKS lets
 * it be other than FAT; this kernel has no vfat). bootctl lists in systemd-boot's menu
 * order, the default first.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa, execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../../src/context.js';
import type { BaseState } from '../../../src/state/schema.js';
import { syncBootEntries } from '../../../src/boot/entries/sync.js';
import { findKernel } from '../../../src/boot/entries/kernels.js';
import { entryDeployment } from '../../../src/state/boot-entry-text.js';
import { filesystemPath } from '../../../src/fs/core/mount-path.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { unavailable } from '../../helpers/mounts.js';
import { crashEverySync, KERNEL_TREE } from '../../helpers/boot.js';

function why(): string | null {
  if (process.getuid?.() !== 0) return 'not root (the ESP is a tmpfs mount)';
  try {
    execaSync('bootctl', ['--version']);
  } catch {
    return 'bootctl is not installed (apt-get install systemd-boot)';
  }
  return null;
}
const NO = why();

let t: TempSysroot | undefined;
let esp: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (esp) {
    execaSync('umount', [esp]);
    fs.rmSync(esp, { recursive: true, force: true });
  }
  t = esp = undefined;
});

const NEW_KERNEL = [
  { path: '/usr/lib/modules/6.2.0-1/vmlinuz', contents: 'kernel 6.2.0-1\n' },
  { path: '/usr/lib/modules/6.2.0-1/initramfs.img', contents: 'initramfs 6.2.0-1\n' },
];

async function withEsp(before: (esp: string) => void = () => {}): Promise<TempSysroot> {
  esp = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-esp-'));
  execaSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', esp]);
  before(esp);
  t = await tempSysroot({ tree: KERNEL_TREE, bootDir: esp, bootLoader: 'systemd-boot', kernelArguments: ['root=LABEL=root', 'rw'] });
  return t;
}

/** An ESP, and a second deployment with a new kernel staged, finalized, booted and marked good: entries 0002 (current) and 0001 (rollback). */
async function withBootedNewKernel(): Promise<void> {
  await withEsp();
  await t!.sysroot.stage({ label: 'k2', files: NEW_KERNEL });
  await t!.sysroot.finalize();
  await t!.sysroot.boot({ runDir: '/nonexistent' });
  await t!.sysroot.markGood();
}

interface Listed {
  id: string;
  options: string;
  linux: string;
  initrd?: string[];
  version: string;
}

/** `bootctl list` of the ESP: the entries in systemd-boot's order, default first. */
async function bootctlList(): Promise<Listed[]> {
  const r = await execa('bootctl', [`--esp-path=${esp}`, '--json=short', '--no-pager', 'list'], { env: { SYSTEMD_RELAX_ESP_CHECKS: '1' }, reject: false });
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Listed);
}

/** Each entry boots the deployment it names with that deployment's own kernel and initramfs. */
function expectOwnKernels(list: Listed[], where: string): void {
  for (const e of list) {
    const id = entryDeployment(e.options)!;
    const tree = t!.sysroot.treePath(id);
    const k = findKernel(tree)!;
    expect(fs.readFileSync(path.join(esp!, e.linux), 'utf8'), `${where}: ${e.id}`).toBe(fs.readFileSync(path.join(tree, k.kernelPath), 'utf8'));
    expect(fs.readFileSync(path.join(esp!, e.initrd![0]!), 'utf8'), `${where}: ${e.id}`).toBe(fs.readFileSync(path.join(tree, k.initrdPath!), 'utf8'));
  }
}

/** The id of the entry `bootctl list` marks as the default (its text output; 252's JSON has no such field). */
async function bootctlDefault(): Promise<string | null> {
  const r = await execa('bootctl', [`--esp-path=${esp}`, '--no-pager', 'list'], { env: { SYSTEMD_RELAX_ESP_CHECKS: '1' }, reject: false });
  expect(r.exitCode, r.stderr).toBe(0);
  const m = /title: .*\(default\).*\n\s*id: (\S+)/.exec(r.stdout);
  return m ? m[1]! : null;
}

/** What a Debian machine with systemd-boot has on its ESP before stagedroot: kernel-install's entry (sort-key debian) and the admin's loader.conf. */
function debianEsp(dir: string): void {
  fs.mkdirSync(path.join(dir, 'loader/entries'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'e9680a08/6.1.0-50-cloud-amd64'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'e9680a08/6.1.0-50-cloud-amd64/linux'), 'debian kernel\n');
  fs.writeFileSync(
    path.join(dir, 'loader/entries/e9680a08-6.1.0-50-cloud-amd64.conf'),
    'title Debian GNU/Linux 12 (bookworm)\nversion 6.1.0-50-cloud-amd64\nmachine-id e9680a08\nsort-key debian\noptions root=LABEL=root rw stagedroot=/stagedroot\nlinux /e9680a08/6.1.0-50-cloud-amd64/linux\n',
  );
  fs.writeFileSync(path.join(dir, 'loader/loader.conf'), 'timeout 0\nconsole-mode keep\ndefault e9680a08-*\n');
}

/** Nothing on the ESP is a symlink or a hardlink (FAT has neither). */
function expectPlainFiles(dir: string): void {
  for (const name of fs.readdirSync(dir, { recursive: true }) as string[]) {
    const st = fs.lstatSync(path.join(dir, name));
    expect(st.isSymbolicLink(), name).toBe(false);
    if (st.isFile()) expect(st.nlink, name).toBe(1);
  }
}

if (NO !== null) {
  if (process.env.CI) throw new Error(`the systemd-boot tests need: ${NO}`);
  describe('systemd-boot entries', () => unavailable(NO));
} else {
  describe('systemd-boot entries on the ESP, as bootctl lists them', () => {
    it('plain files named after their deployment, default first; finalize, rollback reorder them; no boot counting in the names', async () => {
      await withEsp();
      let list = await bootctlList();
      expect(list.map((e) => [e.id, e.options])).toEqual([['stagedroot-0001.conf', `root=LABEL=root rw stagedroot=${filesystemPath(t!.dir)!.onFilesystem} stagedroot.deployment=0001`]]);
      await t!.sysroot.stage({ label: 'k2', files: NEW_KERNEL });
      await t!.sysroot.finalize();
      list = await bootctlList();
      expect(list.map((e) => e.id)).toEqual(['stagedroot-0002.conf', 'stagedroot-0001.conf']);
      expectOwnKernels(list, 'after finalize');
      await t!.sysroot.boot({ runDir: '/nonexistent' });
      await t!.sysroot.markGood();
      await t!.sysroot.rollback();
      list = await bootctlList();
      expect(list.map((e) => e.id)).toEqual(['stagedroot-0001.conf', 'stagedroot-0002.conf']);
      expectOwnKernels(list, 'after rollback');
      expectPlainFiles(esp!);
      expect(fs.readdirSync(path.join(esp!, 'loader/entries')).every((f) => !f.includes('+'))).toBe(true);
      // Nothing rewritten when nothing changed.
      const before = fs.statSync(path.join(esp!, 'loader/entries/stagedroot-0001.conf')).mtimeMs;
      syncBootEntries(makeContext(t!.dir), t!.sysroot.state());
      expect(fs.statSync(path.join(esp!, 'loader/entries/stagedroot-0001.conf')).mtimeMs).toBe(before);
    });

    it("beside the distribution's own entries (sorted first by their sort-key), stagedroot's current is the default: loader.conf says so, the admin's other settings kept", async () => {
      await withEsp(debianEsp);
      const list = await bootctlList();
      // The distribution's entry is listed first (sort-key debian < stagedroot) and stays.
      expect(list.map((e) => e.id)).toEqual(['e9680a08-6.1.0-50-cloud-amd64.conf', 'stagedroot-0001.conf']);
      expect(await bootctlDefault()).toBe('stagedroot-0001.conf');
      expect(fs.readFileSync(path.join(esp!, 'loader/loader.conf'), 'utf8')).toBe('timeout 0\nconsole-mode keep\ndefault stagedroot-*\n');
      await t!.sysroot.stage({ label: 'k2', files: NEW_KERNEL });
      await t!.sysroot.finalize();
      expect(await bootctlDefault()).toBe('stagedroot-0002.conf');
      await t!.sysroot.boot({ runDir: '/nonexistent' });
      await t!.sysroot.markGood();
      await t!.sysroot.rollback();
      expect(await bootctlDefault()).toBe('stagedroot-0001.conf');
      expect(fs.readFileSync(path.join(esp!, 'e9680a08/6.1.0-50-cloud-amd64/linux'), 'utf8')).toBe('debian kernel\n');
      // Nothing left of the writes' temp files.
      expect(fs.readdirSync(path.join(esp!, 'loader')).sort()).toEqual(['entries', 'loader.conf']);
    });

    it('a crash after any write leaves a bootable set: every entry boots its own kernel, the default is the old or the new current', async () => {
      await withBootedNewKernel();
      const before: BaseState = t!.sysroot.state();
      // The rollback's entries: 0001 becomes the default.
      const after: BaseState = { ...before, current: before.rollback!, rollback: before.current };
      const points = await crashEverySync(t!.dir, after, async (n) => {
        const list = await bootctlList();
        expectOwnKernels(list, `crash point ${n}`);
        expect(['stagedroot-0002.conf', 'stagedroot-0001.conf'], `crash point ${n}: default`).toContain(list[0]!.id);
        expect(list.length, `crash point ${n}`).toBeGreaterThan(0);
        syncBootEntries(makeContext(t!.dir), before);
        expect((await bootctlList()).map((e) => e.id)).toEqual(['stagedroot-0002.conf', 'stagedroot-0001.conf']);
      });
      expect(points).toBeGreaterThanOrEqual(2);
    });

    it('a finalize writes one new entry and removes the rollback\'s: the entry the machine boots is never rewritten (a power cut in a FAT rename over it can lose it); a crash at any point leaves the old or the new current the default', async () => {
      await withBootedNewKernel();
      await t!.sysroot.stage({ label: 'k3', files: [{ path: '/etc/k3', contents: 'k3\n' }] });
      const before: BaseState = t!.sysroot.state();
      await t!.sysroot.finalize();
      const after: BaseState = t!.sysroot.state();
      expect((await bootctlList()).map((e) => e.id)).toEqual(['stagedroot-0003.conf', 'stagedroot-0002.conf']);
      const entries = path.join(esp!, 'loader/entries');
      const reset = async (): Promise<void> => {
        syncBootEntries(makeContext(t!.dir), before);
        expect((await bootctlList()).map((e) => e.id)).toEqual(['stagedroot-0002.conf', 'stagedroot-0001.conf']);
      };
      await reset();
      const booted = fs.readFileSync(path.join(entries, 'stagedroot-0002.conf'), 'utf8');
      const touched: string[] = [];
      syncBootEntries(makeContext(t!.dir, { faults: { afterMutation: (op, p) => void (p.startsWith(entries) && touched.push(`${op} ${path.relative(entries, p)}`)) } }), after);
      expect(touched.filter((x) => x.includes('stagedroot-0002'))).toEqual([]);
      expect(touched.some((x) => x.includes('stagedroot-0003.conf'))).toBe(true);
      expect(touched.filter((x) => x.includes('stagedroot-0001'))).toEqual(['unlink stagedroot-0001.conf']);
      expect(fs.readFileSync(path.join(entries, 'stagedroot-0002.conf'), 'utf8')).toBe(booted);
      expect((await bootctlList()).map((e) => e.id)).toEqual(['stagedroot-0003.conf', 'stagedroot-0002.conf']);
      await reset();
      const points = await crashEverySync(t!.dir, after, async (n, crashed) => {
        const list = await bootctlList();
        expectOwnKernels(list, `crash point ${n}`);
        expect(['stagedroot-0002.conf', 'stagedroot-0003.conf'], `crash point ${n}: default`).toContain(list[0]!.id);
        if (crashed) await reset();
      });
      expect(points).toBeGreaterThanOrEqual(2);
    });
    it('a kernel copy left empty on the ESP (a power cut after a FAT rename under an older stagedroot) is copied again at the next sync, not trusted for its name', async () => {
      await withBootedNewKernel();
      const list = await bootctlList();
      const linux = path.join(esp!, list[0]!.linux);
      const initrd = path.join(esp!, list[0]!.initrd![0]!);
      fs.truncateSync(linux, 0);
      fs.rmSync(initrd);
      const ctx = makeContext(t!.dir);
      fs.rmSync(ctx.layout.bootEntriesRecord, { force: true });
      syncBootEntries(ctx, t!.sysroot.state());
      expectOwnKernels(await bootctlList(), 'after the sync');
      expectPlainFiles(esp!);
    });
  });
}
