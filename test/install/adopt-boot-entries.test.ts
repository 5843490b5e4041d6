/**
 * An adopted Debian machine gets boot entries at adopt (`--boot-loader grub --boot-dir
 * /boot/grub`, or systemd-boot on an ESP), and a kernel that a later `stage --run`
 * installs into the new tree (Debian's boot/vmlinuz-V + boot/initrd.img-V) gets its own
 * entry at finalize, beside the old deployment's with its old kernel.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { filesystemPath } from '../../src/fs/core/mount-path.js';
import { parseBootEntry } from '../../src/state/boot-entry-text.js';
import { GRUB_MENU_FILE } from '../../src/state/grub-menu.js';
import { Sysroot } from '../../src/sysroot.js';
import { busyboxMachine, WHY_NO_RUN } from '../helpers/busybox-machine.js';
import { cli } from '../helpers/cli.js';
import { readState } from '../helpers/invariants.js';
import { NO_GRUB_CHECK, grubMenu } from '../helpers/grub.js';
import { unavailable } from '../helpers/mounts.js';

const why = WHY_NO_RUN ?? NO_GRUB_CHECK;

const OLD = '6.1.0-18-amd64';
const NEW = '6.1.0-20-amd64';
const DEBIAN_BOOT = { [`boot/vmlinuz-${OLD}`]: 'kernel 18\n', [`boot/initrd.img-${OLD}`]: 'initrd 18\n', [`boot/config-${OLD}`]: 'config\n' };
/** What `apt-get install linux-image-…` leaves in the new tree, as far as the bootloader is concerned. */
const INSTALL_KERNEL = `echo 'kernel 20' > /boot/vmlinuz-${NEW} && echo 'initrd 20' > /boot/initrd.img-${NEW}`;
const ARGS = ['--kernel-argument', 'root=UUID=1234', '--kernel-argument', 'ro', '--kernel-argument', 'stagedroot=/stagedroot'];

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
  base = undefined;
});

function fakeDebian(extra: Record<string, string> = {}): { root: string; sysroot: string } {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-adopt-boot-'));
  const root = path.join(base, 'root');
  busyboxMachine(root, { ...DEBIAN_BOOT, ...extra });
  return { root, sysroot: path.join(root, 'stagedroot') };
}

async function stageRunAndFinalize(sysroot: string): Promise<string> {
  const r = await cli(['stage', '--run', INSTALL_KERNEL, '--label', 'new kernel', '--sysroot', sysroot, '--no-verify-units']);
  expect(r.code, r.err).toBe(0);
  const f = await cli(['finalize', '--sysroot', sysroot]);
  expect(f.code, f.err).toBe(0);
  return (await Sysroot.open(sysroot)).status().current;
}

/** What GRUB reads at a path of the sysroot's filesystem. */
function grubRead(sysroot: string, p: string): string {
  const fp = filesystemPath(sysroot)!;
  return fs.readFileSync(path.join(fp.mountPoint, path.relative(fp.mountRoot, p)), 'utf8');
}

if (why !== null) {
  if (process.env.CI) throw new Error(`the adopt boot-entry tests need ${why}`);
  describe('adopt with boot entries', () => unavailable(why));
} else {
  describe('adopt --boot-loader: entries at adopt, and for a kernel installed later by stage --run', () => {
    it('GRUB without blscfg: stagedroot.cfg has the adopted kernel, then both deployments each with its own kernel; grub-script-check passes', async () => {
      const { root, sysroot } = fakeDebian({ 'boot/grub/grub.cfg': '# made by update-grub\n' });
      const grubDir = path.join(root, 'boot/grub');
      const a = await cli(['adopt', '--root', root, '--boot-loader', 'grub', '--boot-dir', grubDir, ...ARGS]);
      expect(a.code, a.err).toBe(0);
      expect(readState(sysroot)).toMatchObject({ bootLoader: 'grub', bootDir: grubDir, bootDirFromSysroot: '../boot/grub' });
      let m = grubMenu(grubDir);
      expect(m.map((e) => e.id)).toEqual(['stagedroot-0001']);
      expect(grubRead(sysroot, m[0]!.linux)).toBe('kernel 18\n');
      expect(m[0]!.args).toEqual(['root=UUID=1234', 'ro', 'stagedroot=/stagedroot', 'stagedroot.deployment=0001']);

      const id = await stageRunAndFinalize(sysroot);
      expect(id).toBe('0002');
      m = grubMenu(grubDir);
      expect(m.map((e) => e.id)).toEqual(['stagedroot-0002', 'stagedroot-0001']);
      const [fresh, old] = m;
      expect(fresh!.linux).toMatch(new RegExp(`/deploy/0002/tree/boot/vmlinuz-${NEW}$`));
      expect(grubRead(sysroot, fresh!.linux)).toBe('kernel 20\n');
      expect(grubRead(sysroot, fresh!.initrd)).toBe('initrd 20\n');
      expect(fresh!.args.at(-1)).toBe('stagedroot.deployment=0002');
      expect(old!.linux).toMatch(new RegExp(`/deploy/0001/tree/boot/vmlinuz-${OLD}$`));
      expect(grubRead(sysroot, old!.linux)).toBe('kernel 18\n');
      expect(grubRead(sysroot, old!.initrd)).toBe('initrd 18\n');
      expect(old!.args.at(-1)).toBe('stagedroot.deployment=0001');
      // The deployment that booted before has no new kernel: the update's is in the new tree only.
      expect(fs.existsSync(path.join(sysroot, `deploy/0001/tree/boot/vmlinuz-${NEW}`))).toBe(false);
      const check = await execa('grub-script-check', [path.join(grubDir, GRUB_MENU_FILE)], { reject: false });
      expect(check.exitCode, `${check.stdout}${check.stderr}`).toBe(0);
      expect(fs.readFileSync(path.join(grubDir, 'grub.cfg'), 'utf8')).toBe('# made by update-grub\n');
    });

    it('systemd-boot on an ESP: one entry per deployment, each with its own kernel copied onto the ESP', async () => {
      const { root, sysroot } = fakeDebian();
      const esp = path.join(base!, 'esp');
      fs.mkdirSync(esp);
      const a = await cli(['adopt', '--root', root, '--boot-loader', 'systemd-boot', '--boot-dir', esp, ...ARGS]);
      expect(a.code, a.err).toBe(0);
      await stageRunAndFinalize(sysroot);
      const dir = path.join(esp, 'loader/entries');
      const entries = fs
        .readdirSync(dir)
        .sort()
        .map((f): Record<string, string> & { f: string } => ({ f, ...parseBootEntry(fs.readFileSync(path.join(dir, f), 'utf8')) }));
      expect(entries.map((e) => e.f)).toEqual(['stagedroot-0001.conf', 'stagedroot-0002.conf']);
      const kernels = entries.map((e) => fs.readFileSync(path.join(esp, e.linux!), 'utf8'));
      const initrds = entries.map((e) => fs.readFileSync(path.join(esp, e.initrd!), 'utf8'));
      expect(kernels).toEqual(['kernel 18\n', 'kernel 20\n']);
      expect(initrds).toEqual(['initrd 18\n', 'initrd 20\n']);
      expect(entries.map((e) => e.options!.split(' ').at(-1))).toEqual(['stagedroot.deployment=0001', 'stagedroot.deployment=0002']);
      // systemd-boot's default is the highest version: the new deployment.
      expect(Number(entries[1]!.version)).toBeGreaterThan(Number(entries[0]!.version));
    });

    it('--boot-loader needs --boot-dir, and a kind it knows', async () => {
      const { root } = fakeDebian();
      expect((await cli(['adopt', '--root', root, '--boot-loader', 'grub'])).code).toBe(2);
      expect((await cli(['adopt', '--root', root, '--boot-loader', 'lilo', '--boot-dir', path.join(root, 'boot')])).code).toBe(2);
      expect(fs.existsSync(path.join(root, 'stagedroot/state.json'))).toBe(false);
    });
  });
}
