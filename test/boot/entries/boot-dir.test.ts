/**
 * The boot directory is recorded so that it stays right when the physical root moves:
 * before the first boot under stagedroot the sysroot is /stagedroot and GRUB's directory
 * /boot/grub; after it the physical root is under /sysroot (the sysroot /sysroot/stagedroot,
 * from the initramfs's record) and /boot/grub is the booted tree's stale copy. Here the
 * physical root is a temp dir, renamed to where the booted system sees it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../../src/sysroot.js';
import { GRUB_MENU_FILE } from '../../../src/state/grub-menu.js';
import { buildTree } from '../../../src/testing/index.js';
import { readState } from '../../helpers/invariants.js';

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
  base = undefined;
});

const DEBIAN_TREE = { 'etc/os-release': 'ID=debian\n', 'boot/vmlinuz-6.1.0-18-amd64': 'kernel 18\n', 'boot/initrd.img-6.1.0-18-amd64': 'initrd 18\n' };

/** A physical root PHYS with a sysroot at PHYS/stagedroot and GRUB's directory at PHYS/boot/grub. */
async function physicalRoot(loader: 'grub' | 'bls'): Promise<{ phys: string; sysroot: string; grubDir: string }> {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-views-'));
  const phys = path.join(base, 'phys');
  const grubDir = path.join(phys, 'boot/grub');
  fs.mkdirSync(grubDir, { recursive: true });
  fs.writeFileSync(path.join(grubDir, 'grub.cfg'), '# made by update-grub\n');
  const tree = buildTree(path.join(base, 'tree'), DEBIAN_TREE);
  const sysroot = path.join(phys, 'stagedroot');
  await Sysroot.init(sysroot, { fromDirectory: tree, bootDir: grubDir, bootLoader: loader, kernelArguments: ['root=UUID=1234', 'ro'] });
  return { phys, sysroot, grubDir };
}

/** The deployments stagedroot.cfg names, default first. */
function grubIds(grubDir: string): string[] {
  return [...fs.readFileSync(path.join(grubDir, GRUB_MENU_FILE), 'utf8').matchAll(/--id stagedroot-(\d+) \{/g)].map((m) => m[1]!);
}

/** The deployments of the BLS entries the `loader` link holds. */
function blsIds(bootDir: string): string[] {
  return fs
    .readdirSync(path.join(bootDir, 'loader', 'entries'))
    .map((f) => /^stagedroot-(\d+)\.conf$/.exec(f)![1]!)
    .sort()
    .reverse();
}

/** The reboot into what finalize made current: booted, then marked good. */
async function bootedAndGood(dir: string): Promise<void> {
  const s = await Sysroot.open(dir);
  await s.boot({ runDir: '/nonexistent' });
  await s.markGood();
}

async function update(dir: string, label: string): Promise<void> {
  const s = await Sysroot.open(dir);
  await s.stage({ label, files: [{ path: '/etc/motd', contents: `${label}\n` }] });
  await s.finalize();
}

/** The physical root as the booted system sees it (BOOTED/sysroot), and a stale copy of /boot/grub left at the old path, as the booted tree's own /boot. */
function bootThroughStagedroot(phys: string): { booted: string; stale: string } {
  const booted = path.join(base!, 'booted-root');
  fs.mkdirSync(booted);
  fs.renameSync(phys, path.join(booted, 'sysroot'));
  const stale = path.join(phys, 'boot/grub');
  fs.mkdirSync(stale, { recursive: true });
  fs.writeFileSync(path.join(stale, 'grub.cfg'), '# the deployment\'s copy\n');
  return { booted, stale };
}

describe('the boot directory before and after booting through stagedroot', () => {
  it('GRUB: recorded relative to the sysroot; entries go to the physical root\'s /boot/grub in both views, never to the booted tree\'s copy', async () => {
    const { phys, sysroot, grubDir } = await physicalRoot('grub');
    expect(readState(sysroot)).toMatchObject({ bootDir: grubDir, bootDirFromSysroot: '../boot/grub', bootLoader: 'grub' });
    expect(readState(sysroot).bootDirOnSysrootFs).toBeUndefined();
    // Pre-boot view: the sysroot at its adoption-time path.
    await update(sysroot, 'before');
    expect(grubIds(grubDir)).toEqual(['0002', '0001']);

    // Booted view: the same physical root under /sysroot; the old absolute path is the tree's stale copy.
    const { booted, stale } = bootThroughStagedroot(phys);
    const bootedSysroot = path.join(booted, 'sysroot/stagedroot');
    await bootedAndGood(bootedSysroot);
    await update(bootedSysroot, 'after');
    expect(grubIds(path.join(booted, 'sysroot/boot/grub'))).toEqual(['0003', '0002']);
    expect(fs.readdirSync(stale)).toEqual(['grub.cfg']);
    // The menu's kernel paths are the sysroot's on its filesystem, as GRUB reads them (the booted view's).
    const cfg = fs.readFileSync(path.join(booted, 'sysroot/boot/grub', GRUB_MENU_FILE), 'utf8');
    expect(cfg).toContain(`linux ${path.join(booted, 'sysroot/stagedroot')}/deploy/0003/tree/boot/vmlinuz-6.1.0-18-amd64`);
    expect(fs.readFileSync(path.join(booted, 'sysroot/boot/grub/grub.cfg'), 'utf8')).toBe('# made by update-grub\n');
  });

  it('BLS: the same for a boot directory on the sysroot\'s filesystem', async () => {
    const { phys, sysroot, grubDir } = await physicalRoot('bls');
    await update(sysroot, 'before');
    expect(blsIds(grubDir)).toEqual(['0002', '0001']);
    const { booted, stale } = bootThroughStagedroot(phys);
    await bootedAndGood(path.join(booted, 'sysroot/stagedroot'));
    await update(path.join(booted, 'sysroot/stagedroot'), 'after');
    expect(blsIds(path.join(booted, 'sysroot/boot/grub'))).toEqual(['0003', '0002']);
    expect(fs.readdirSync(stale)).toEqual(['grub.cfg']);
  });

  it('a state with only the absolute bootDir (written before the relative form) still writes there', async () => {
    const { sysroot, grubDir } = await physicalRoot('grub');
    for (const f of ['state.json', 'state.json.bak']) {
      const file = path.join(sysroot, f);
      if (!fs.existsSync(file)) continue;
      const s = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      delete s.bootDirFromSysroot;
      fs.writeFileSync(file, JSON.stringify(s));
    }
    fs.rmSync(path.join(grubDir, GRUB_MENU_FILE));
    await update(sysroot, 'old state');
    expect(grubIds(grubDir)).toEqual(['0002', '0001']);
    expect(readState(sysroot).bootDirFromSysroot).toBeUndefined();
  });

  it('a boot directory on another filesystem (an ESP, a /boot partition) keeps its absolute path: fstab mounts it at the same place in every deployment', async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-boot-views-'));
    const esp = '/dev/shm';
    if (fs.statSync(esp).dev === fs.statSync(base).dev) return expect.fail('/dev/shm is expected to be another filesystem than the temp dir');
    const dir = fs.mkdtempSync(path.join(esp, 'stagedroot-esp-'));
    try {
      const tree = buildTree(path.join(base, 'tree'), DEBIAN_TREE);
      fs.mkdirSync(path.join(base, 'phys'));
      const sysroot = path.join(base, 'phys/stagedroot');
      await Sysroot.init(sysroot, { fromDirectory: tree, bootDir: dir, bootLoader: 'systemd-boot', kernelArguments: ['rw'] });
      const s = readState(sysroot);
      expect(s.bootDir).toBe(dir);
      expect(s.bootDirFromSysroot).toBeUndefined();
      await update(sysroot, 'esp');
      expect(fs.readdirSync(path.join(dir, 'loader/entries')).sort()).toEqual(['stagedroot-0001.conf', 'stagedroot-0002.conf']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
