/**
 * GRUB without blscfg (Debian, Ubuntu): stagedroot's own menu file beside grub.cfg,
 * loaded by /etc/grub.d/09_stagedroot. Checked with GRUB's own grub-script-check
 * (grub-common); the kernel paths are resolved as GRUB resolves them, on the
 * filesystem the sysroot is on.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa, execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { filesystemPath } from '../../../src/fs/core/mount-path.js';
import { GRUB_MENU_FILE } from '../../../src/state/grub-menu.js';
import { findKernel } from '../../../src/boot/entries/kernels.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { NO_GRUB_CHECK, grubMenu } from '../../helpers/grub.js';
import { unavailable } from '../../helpers/mounts.js';

const SCRIPT = path.resolve(import.meta.dirname, '../../../initramfs/grub/09_stagedroot');
const NO = NO_GRUB_CHECK;

let t: TempSysroot | undefined;
let extra: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (extra) fs.rmSync(extra, { recursive: true, force: true });
  t = extra = undefined;
});

const DEBIAN_TREE = { 'etc/os-release': 'ID=debian\n', 'boot/vmlinuz-6.1.0-18-cloud-amd64': 'cloud kernel\n', 'boot/initrd.img-6.1.0-18-cloud-amd64': 'cloud initrd\n' };

/** A sysroot whose GRUB directory is beside it, on the same filesystem (Debian's one-filesystem layout). */
async function withGrub(): Promise<{ grubDir: string }> {
  extra = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-grub-'));
  const grubDir = path.join(extra, 'boot/grub');
  fs.mkdirSync(grubDir, { recursive: true });
  fs.writeFileSync(path.join(grubDir, 'grub.cfg'), '# made by update-grub\n');
  t = await tempSysroot({ tree: DEBIAN_TREE, bootDir: grubDir, bootLoader: 'grub', kernelArguments: ['root=UUID=1234', 'ro', 'quiet'] });
  return { grubDir };
}

async function scriptCheck(text: string): Promise<void> {
  const file = path.join(extra!, 'check.cfg');
  fs.writeFileSync(file, text);
  const r = await execa('grub-script-check', [file], { reject: false });
  expect(r.exitCode, `grub-script-check: ${r.stdout}${r.stderr}\n${text}`).toBe(0);
}

/** What GRUB reads at a path on the sysroot's filesystem (through the mount it is under here). */
function grubRead(p: string): string {
  const fp = filesystemPath(t!.dir)!;
  return fs.readFileSync(path.join(fp.mountPoint, path.relative(fp.mountRoot, p)), 'utf8');
}

if (NO !== null) {
  if (process.env.CI) throw new Error(`the GRUB tests need ${NO}`);
  describe('GRUB menu', () => unavailable(NO));
} else {
  describe('GRUB without blscfg: stagedroot.cfg beside grub.cfg', () => {
    it('one entry per deployment with a stable id, reading the kernel from the deployment\'s own tree; grub.cfg is never rewritten', async () => {
      const { grubDir } = await withGrub();
      const onFs = filesystemPath(t!.dir)!.onFilesystem;
      let m = grubMenu(grubDir);
      expect(m.map((e) => e.id)).toEqual(['stagedroot-0001']);
      expect(m[0]).toEqual({ id: 'stagedroot-0001', linux: `${onFs}/deploy/0001/tree/boot/vmlinuz-6.1.0-18-cloud-amd64`, args: ['root=UUID=1234', 'ro', 'quiet', `stagedroot=${onFs}`, 'stagedroot.deployment=0001'], initrd: `${onFs}/deploy/0001/tree/boot/initrd.img-6.1.0-18-cloud-amd64` });
      expect(grubRead(m[0]!.linux)).toBe('cloud kernel\n');
      expect(grubRead(m[0]!.initrd)).toBe('cloud initrd\n');
      await scriptCheck(fs.readFileSync(path.join(grubDir, GRUB_MENU_FILE), 'utf8'));

      // An update with another kernel (Debian's: boot/vmlinuz-V) is the default after finalize.
      await t!.sysroot.stage({ label: 'new kernel', files: [{ path: '/boot/vmlinuz-6.1.0-20-amd64', contents: 'generic kernel\n' }, { path: '/boot/initrd.img-6.1.0-20-amd64', contents: 'generic initrd\n' }] });
      await t!.sysroot.finalize();
      m = grubMenu(grubDir);
      expect(m.map((e) => e.id)).toEqual(['stagedroot-0002', 'stagedroot-0001']);
      expect(grubRead(m[0]!.linux)).toBe('generic kernel\n');
      expect(grubRead(m[1]!.linux)).toBe('cloud kernel\n');
      for (const e of m) {
        const id = e.id.replace('stagedroot-', '');
        expect(e.args.at(-1)).toBe(`stagedroot.deployment=${id}`);
        expect(e.linux).toBe(`${onFs}/deploy/${id}/tree/${findKernel(t!.sysroot.treePath(id))!.kernelPath}`);
      }
      await t!.sysroot.boot({ runDir: '/nonexistent' });
      await t!.sysroot.markGood();
      await t!.sysroot.rollback();
      expect(grubMenu(grubDir).map((e) => e.id)).toEqual(['stagedroot-0001', 'stagedroot-0002']);
      await scriptCheck(fs.readFileSync(path.join(grubDir, GRUB_MENU_FILE), 'utf8'));
      expect(fs.readFileSync(path.join(grubDir, 'grub.cfg'), 'utf8')).toBe('# made by update-grub\n');
      expect(fs.readdirSync(grubDir).sort()).toEqual(['grub.cfg', GRUB_MENU_FILE]);
    });

    it('titles and arguments GRUB would split or expand are quoted', async () => {
      extra = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-grub-'));
      fs.mkdirSync(path.join(extra, 'grub'));
      t = await tempSysroot({ tree: DEBIAN_TREE, bootDir: path.join(extra, 'grub'), bootLoader: 'grub', label: "web's $HOME; {x}", kernelArguments: ['console=ttyS0,115200', 'x=$y;z'] });
      const text = fs.readFileSync(path.join(extra, 'grub', GRUB_MENU_FILE), 'utf8');
      expect(text).toContain(`menuentry 'web'\\''s $HOME; {x} (stagedroot 0001)' --class`);
      expect(text).toContain(` console=ttyS0,115200 'x=$y;z' `);
      await scriptCheck(text);
    });

    it('09_stagedroot (run by update-grub) makes grub.cfg load stagedroot.cfg with GRUB\'s root on the physical root', async () => {
      extra = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-grub-'));
      // grub-mkconfig's library, as far as the script uses it (the real one probes devices).
      fs.writeFileSync(path.join(extra, 'grub-mkconfig_lib'), 'prepare_grub_to_access_device() {\n  echo "insmod ext2"\n  echo "search --no-floppy --fs-uuid --set=root 0b1e-uuid-of-$1"\n}\n');
      const r = await execa('sh', [SCRIPT], { env: { GRUB_DEVICE: '/dev/vda1', pkgdatadir: extra }, reject: false });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toContain('if [ -f ${config_directory}/stagedroot.cfg ]; then');
      expect(r.stdout).toContain('  search --no-floppy --fs-uuid --set=root 0b1e-uuid-of-/dev/vda1');
      expect(r.stdout).toContain('  export stagedroot_root\n');
      expect(r.stdout).toContain('  source ${config_directory}/stagedroot.cfg');
      await scriptCheck(r.stdout);
      // With blscfg, GRUB reads the BLS entries: nothing to add.
      const bls = await execa('sh', [SCRIPT], { env: { GRUB_DEVICE: '/dev/vda1', pkgdatadir: extra, GRUB_ENABLE_BLSCFG: 'true' } });
      expect(bls.stdout).toBe('');
      // Outside grub-mkconfig it says what runs it.
      const alone = await execa('sh', [SCRIPT], { env: { pkgdatadir: extra }, reject: false });
      expect(alone.exitCode).toBe(1);
      expect(alone.stderr).toContain('run by grub-mkconfig (update-grub)');
    });

    it('refuses a GRUB directory on another filesystem than the sysroot (a separate /boot)', async () => {
      if (process.getuid?.() !== 0) return expect.fail('needs root (a tmpfs mount stands for a separate /boot)');
      extra = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-grub-'));
      execaSync('mount', ['-t', 'tmpfs', 'tmpfs', extra]);
      try {
        const err = await tempSysroot({ tree: DEBIAN_TREE, bootDir: extra, bootLoader: 'grub' }).then(() => null, (e: unknown) => e);
        expect(err).toMatchObject({ code: 'USAGE' });
        expect((err as Error).message).toContain('is not on the sysroot\'s filesystem');
      } finally {
        execaSync('umount', [extra]);
      }
    });
  });
}
