import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../../src/context.js';
import { parseBootEntry } from '../../../src/state/boot-entry-text.js';
import type { BaseState } from '../../../src/state/schema.js';
import { syncBootEntries } from '../../../src/boot/entries/sync.js';
import { findKernel } from '../../../src/boot/entries/kernels.js';
import { filesystemPath } from '../../../src/fs/core/mount-path.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { crashEverySync, KERNEL_TREE } from '../../helpers/boot.js';

let t: TempSysroot | undefined;
let boot: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (boot) fs.rmSync(boot, { recursive: true, force: true });
  t = boot = undefined;
});


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
    expect(first).toMatchObject({ file: 'stagedroot-0002.conf', title: 'web-2 (stagedroot 0002)', options: 'root=LABEL=root rw stagedroot=/sysroot quiet stagedroot.deployment=0002' });
    expect(second).toMatchObject({ file: 'stagedroot-0001.conf', options: 'root=LABEL=root rw stagedroot=/sysroot stagedroot.deployment=0001' });
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

  it('every entry names its deployment and boots that deployment\'s own kernel; stagedroot= is the sysroot\'s path on its filesystem when no argument gives it', async () => {
    await withBootDir(['root=LABEL=root', 'rw']);
    await t!.sysroot.stage({ label: 'k2', files: [{ path: '/usr/lib/modules/6.2.0-1/vmlinuz', contents: 'kernel 6.2.0-1\n' }] });
    await t!.sysroot.finalize();
    const onFs = filesystemPath(t!.dir)!.onFilesystem;
    for (const e of entries()) {
      const id = /^stagedroot-(\d+)\.conf$/.exec(e.file!)![1]!;
      expect(e.options).toBe(`root=LABEL=root rw stagedroot=${onFs} stagedroot.deployment=${id}`);
      const k = findKernel(t!.sysroot.treePath(id))!;
      expect(fs.readFileSync(path.join(boot!, e.linux!), 'utf8')).toBe(fs.readFileSync(path.join(t!.sysroot.treePath(id), k.kernelPath), 'utf8'));
    }
    expect(entries().map((e) => e.linux!.replace(/.*\//, ''))).toEqual(['vmlinuz-6.2.0-1', 'vmlinuz-6.1.0-1']);
  });

  it('reads Debian\'s kernels in the tree\'s /boot (vmlinuz-V, initrd.img-V), never through a symlink', async () => {
    boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-dir-'));
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=debian\n', 'boot/vmlinuz-6.1.0-18-amd64': 'debian kernel\n', 'boot/initrd.img-6.1.0-18-amd64': 'debian initrd\n', 'boot/config-6.1.0-18-amd64': 'x\n', 'usr/lib/modules/6.1.0-18-amd64/modules.dep': '\n' }, bootDir: boot });
    const [e] = entries();
    expect(fs.readFileSync(path.join(boot, e!.linux!), 'utf8')).toBe('debian kernel\n');
    expect(fs.readFileSync(path.join(boot, e!.initrd!), 'utf8')).toBe('debian initrd\n');
    expect(findKernel(t.sysroot.treePath('0001'))).toMatchObject({ version: '6.1.0-18-amd64', kernelPath: 'boot/vmlinuz-6.1.0-18-amd64', initrdPath: 'boot/initrd.img-6.1.0-18-amd64' });
    // A kernel that is a symlink (it could lead out of the tree) is not a kernel.
    const tree = t.sysroot.treePath('0001');
    fs.writeFileSync(path.join(os.tmpdir(), `stagedroot-host-file-${process.pid}`), 'host\n');
    fs.symlinkSync(path.join(os.tmpdir(), `stagedroot-host-file-${process.pid}`), path.join(tree, 'boot/vmlinuz-9.9'));
    expect(findKernel(tree)!.version).toBe('6.1.0-18-amd64');
    // Nor is one reached through a symlinked directory.
    fs.mkdirSync(path.join(tree, 'usr/lib/modules/9.9-other'));
    fs.symlinkSync(path.dirname(path.join(tree, 'boot/vmlinuz-6.1.0-18-amd64')), path.join(tree, 'usr/lib/modules/9.9'));
    fs.writeFileSync(path.join(tree, 'boot/vmlinuz'), 'x\n');
    expect(findKernel(tree)!.version).toBe('6.1.0-18-amd64');
    fs.rmSync(path.join(os.tmpdir(), `stagedroot-host-file-${process.pid}`));
  });

  it('init --boot-dir refuses a tree without a kernel, naming where it looked', async () => {
    boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-dir-'));
    const err = await tempSysroot({ tree: { 'etc/os-release': 'ID=debian\n', 'boot/grub/grub.cfg': '\n' }, bootDir: boot }).then(() => null, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'USAGE' });
    expect((err as Error).message).toContain('ships no kernel (looked for usr/lib/modules/VERSION/vmlinuz, boot/vmlinuz-VERSION)');
    expect(fs.readdirSync(boot)).toEqual([]);
  });

  it('a crash at any point of the swap leaves the old set or the new set, never a mix; the next sync completes it', async () => {
    await withBootDir();
    await t!.sysroot.stage({ label: 'k2', files: [{ path: '/usr/lib/modules/6.2.0-1/vmlinuz', contents: 'kernel 6.2.0-1\n' }] });
    const before: BaseState = t!.sysroot.state();
    const oldSet = JSON.stringify(entries());
    // The state after finalize, written by hand so that only the entries are at stake.
    const after: BaseState = { ...before, current: before.staged!, staged: null, rollback: before.current };
    const points = await crashEverySync(t!.dir, after, (n) => {
      const seen = JSON.stringify(entries());
      const newSet = (() => {
        syncBootEntries(makeContext(t!.dir), after);
        return JSON.stringify(entries());
      })();
      expect([oldSet, newSet], `crash point ${n}`).toContain(seen);
      // Back to the old set for the next crash point.
      syncBootEntries(makeContext(t!.dir), before);
      expect(JSON.stringify(entries())).toBe(oldSet);
    });
    expect(points).toBeGreaterThan(4);
  });
  it('kernel hashes are kept by inode, size, mtime and ctime: an unchanged kernel is not read again, one rewritten in place (size and mtime kept) is', async () => {
    await withBootDir();
    const cache = path.join(t!.dir, 'deploy/0001/kernel-hashes.json');
    const kernel = path.join(t!.dir, 'deploy/0001/tree/usr/lib/modules/6.1.0-1/vmlinuz');
    const recorded = JSON.parse(fs.readFileSync(cache, 'utf8')) as { rel: string; sha256: string }[];
    expect(recorded.map((c) => c.rel)).toEqual(['usr/lib/modules/6.1.0-1/vmlinuz', 'usr/lib/modules/6.1.0-1/initramfs.img']);
    const tree = path.join(t!.dir, 'deploy/0001/tree');
    const real = findKernel(tree)!.hash;
    // The cache is what a lookup uses while the files are the ones it recorded (a planted value shows it).
    const planted = recorded.map((c) => ({ ...c, sha256: c.sha256.replace(/^./, c.sha256[0] === '0' ? '1' : '0') }));
    fs.writeFileSync(cache, JSON.stringify(planted));
    const cached = findKernel(tree, { file: cache, dfs: makeContext(t!.dir).dfs })!.hash;
    expect(cached).not.toBe(real);
    // Rewritten in place, same size, mtime put back: the ctime moved, so it is read again (and the cache rewritten).
    const st = fs.statSync(kernel);
    await new Promise((r) => setTimeout(r, 20));
    fs.writeFileSync(kernel, 'kernel 6.1.0-X\n');
    fs.utimesSync(kernel, st.atime, st.mtime);
    expect(fs.statSync(kernel).size).toBe(st.size);
    const again = findKernel(tree, { file: cache, dfs: makeContext(t!.dir).dfs })!.hash;
    expect(again).not.toBe(cached);
    const rewritten = JSON.parse(fs.readFileSync(cache, 'utf8')) as { rel: string; sha256: string }[];
    expect(rewritten[0]!.sha256).toBe(createHash('sha256').update('kernel 6.1.0-X\n').digest('hex'));
    expect(rewritten[1]!.sha256).toBe(planted[1]!.sha256); // the initramfs did not change: still the cache's
    // A torn cache file is no error: the images are read.
    fs.writeFileSync(cache, '{"torn');
    expect(findKernel(tree, { file: cache, dfs: makeContext(t!.dir).dfs })!.hash).toBe(findKernel(tree)!.hash);
  });

  it("a new deployment's first sync takes its images' hashes from its manifest while they are the inodes it recorded; a changed one is read", async () => {
    boot = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-dir-'));
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=debian\n', 'boot/vmlinuz-6.1.0-18-amd64': 'debian kernel\n', 'boot/initrd.img-6.1.0-18-amd64': 'debian initrd\n', 'usr/lib/modules/6.1.0-18-amd64/modules.dep': '\n' }, bootDir: boot });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/os-release', contents: 'ID=debian\nVERSION=2\n' }] });
    const tree = path.join(t.dir, 'deploy', r.id, 'tree');
    const cache = path.join(t.dir, 'deploy', r.id, 'kernel-hashes.json');
    const manifest = path.join(t.dir, 'deploy', r.id, 'manifest.ndjson');
    const rel = 'boot/vmlinuz-6.1.0-18-amd64';
    const real = findKernel(tree)!.hash;
    const kernelSha = createHash('sha256').update('debian kernel\n').digest('hex');
    // A copy of the manifest (and its overlay) with another hash planted for the kernel shows where the lookup took it from.
    const planted = kernelSha.replace(/^./, kernelSha[0] === '0' ? '1' : '0');
    const copy = path.join(t.scratch, 'manifest.ndjson');
    for (const [from, to] of [[manifest, copy], [`${manifest}.overlay`, `${copy}.overlay`]] as const) {
      if (fs.existsSync(from)) fs.writeFileSync(to, fs.readFileSync(from, 'utf8').split(kernelSha).join(planted));
    }
    const dfs = makeContext(t.dir).dfs;
    fs.rmSync(cache, { force: true });
    expect(findKernel(tree, { file: cache, dfs, manifest: copy })!.hash).not.toBe(real);
    expect((JSON.parse(fs.readFileSync(cache, 'utf8')) as { rel: string; sha256: string }[]).find((c) => c.rel === rel)!.sha256).toBe(planted);
    // The real manifest: the hash the image has, not read.
    fs.rmSync(cache);
    expect(findKernel(tree, { file: cache, dfs, manifest })!.hash).toBe(real);
    // Changed since the manifest recorded it (same size, mtime put back; the ctime moved): read, whatever the manifest says.
    fs.rmSync(cache);
    const host = path.join(tree, rel);
    const st = fs.statSync(host);
    await new Promise((res) => setTimeout(res, 20));
    fs.writeFileSync(host, 'debian KERNEL\n');
    fs.utimesSync(host, st.atime, st.mtime);
    const read = findKernel(tree, { file: cache, dfs, manifest: copy })!.hash;
    expect(read).toBe(findKernel(tree)!.hash);
    expect(read).not.toBe(real);
  });

});
