import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { installHost } from '../../src/install/install.js';
import { renderUnit } from '../../src/install/unit-text.js';
import { cli } from '../helpers/cli.js';

const HAVE_SYSTEMCTL = ((): boolean => {
  try {
    execaSync('systemctl', ['--version']);
    return true;
  } catch {
    return false;
  }
})();
if (!HAVE_SYSTEMCTL) {
  if (process.env.CI) throw new Error('systemctl is required in CI (install systemd)');
  console.warn('SKIPPED enabling units in the install tests: systemctl is not installed');
}

let tmp: string | undefined;
afterEach(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
});

/** A root with a stagedroot CLI where `npm install -g` puts it. */
function hostRoot(): string {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-install-'));
  fs.mkdirSync(path.join(tmp, 'usr/local/bin'), { recursive: true });
  fs.writeFileSync(path.join(tmp, 'usr/local/bin/stagedroot'), '#!/bin/sh\n', { mode: 0o755 });
  return tmp;
}

const read = (root: string, p: string): string => fs.readFileSync(path.join(root, p), 'utf8');

describe('stagedroot install', () => {
  it('writes units for the CLI and sysroot that exist, with no condition that could skip them silently', async () => {
    const root = hostRoot();
    const r = await installHost({ root, sysroot: '/srv/stagedroot', cli: '/usr/local/bin/stagedroot', enable: HAVE_SYSTEMCTL });
    const boot = read(root, 'etc/systemd/system/stagedroot-boot.service');
    expect(boot).toContain('ExecStart=/usr/local/bin/stagedroot boot\n');
    // No sysroot path in a unit: the CLI finds it (the initramfs's record, else the environment file).
    expect(boot).not.toContain('STAGEDROOT_SYSROOT');
    expect(boot).not.toContain('/srv/stagedroot');
    expect(boot).toContain('RequiresMountsFor=/sysroot\n');
    expect(read(root, 'etc/systemd/system/stagedroot-finalize.service')).toContain('ExecStop=/usr/local/bin/stagedroot finalize\n');
    expect(read(root, 'etc/systemd/system/stagedroot-health.service')).toContain('ExecStart=/usr/local/bin/stagedroot health\n');
    expect(read(root, 'etc/systemd/system/stagedroot-detach-usr.service')).toContain('ExecStart=/bin/umount --lazy /usr\n');
    expect(read(root, 'etc/systemd/system/systemd-journal-flush.service.d/50-stagedroot.conf')).toContain('\nConflicts=umount.target\nBefore=umount.target\n');
    for (const u of ['boot', 'finalize', 'health']) {
      const text = read(root, `etc/systemd/system/stagedroot-${u}.service`);
      expect(text).not.toMatch(/^Condition/m);
      expect(text).not.toContain('/usr/bin/stagedroot');
    }
    expect(read(root, 'etc/stagedroot/environment')).toContain('STAGEDROOT_SYSROOT=/srv/stagedroot\n');
    // The initramfs step and its wiring.
    expect(fs.statSync(path.join(root, 'usr/lib/stagedroot/stagedroot-prepare-root')).mode & 0o777).toBe(0o755);
    expect(read(root, 'usr/lib/stagedroot/stagedroot-prepare-root')).toBe(fs.readFileSync(path.resolve(import.meta.dirname, '../../initramfs/stagedroot-prepare-root'), 'utf8'));
    for (const p of ['usr/lib/dracut/modules.d/50stagedroot/module-setup.sh', 'usr/lib/dracut/modules.d/50stagedroot/stagedroot-prepare-root.service', 'usr/share/initramfs-tools/hooks/stagedroot', 'usr/share/initramfs-tools/scripts/local-bottom/stagedroot', 'etc/grub.d/09_stagedroot']) {
      expect(fs.existsSync(path.join(root, p)), p).toBe(true);
    }
    expect(r.warnings.join('\n')).toContain('there is no sysroot at /srv/stagedroot');
    if (HAVE_SYSTEMCTL) {
      expect(r.enabled).toEqual(['stagedroot-boot.service', 'stagedroot-detach-usr.service', 'stagedroot-finalize.service', 'stagedroot-health.service']);
      expect(fs.readlinkSync(path.join(root, 'etc/systemd/system/final.target.wants/stagedroot-detach-usr.service'))).toBe('/etc/systemd/system/stagedroot-detach-usr.service');
      expect(fs.readlinkSync(path.join(root, 'etc/systemd/system/sysinit.target.wants/stagedroot-boot.service'))).toBe('/etc/systemd/system/stagedroot-boot.service');
      expect(fs.readlinkSync(path.join(root, 'etc/systemd/system/multi-user.target.wants/stagedroot-finalize.service'))).toBe('/etc/systemd/system/stagedroot-finalize.service');
      expect(fs.readlinkSync(path.join(root, 'etc/systemd/system/boot-complete.target.requires/stagedroot-health.service'))).toBe('/etc/systemd/system/stagedroot-health.service');
    }
  });

  it('on a read-only /usr (a booted deployment) writes nothing and says how to install into the next deployment', async () => {
    const root = hostRoot();
    fs.mkdirSync(path.join(root, 'usr/lib'), { recursive: true });
    execaSync('mount', ['--bind', path.join(root, 'usr'), path.join(root, 'usr')]);
    try {
      execaSync('mount', ['-o', 'remount,bind,ro', path.join(root, 'usr')]);
      const r = await cli(['install', '--root', root, '--sysroot', '/stagedroot', '--cli', '/usr/local/bin/stagedroot', '--no-enable']);
      expect(r.code).toBe(1);
      expect(r.err).toContain('READ_ONLY');
      expect(r.err).toContain(`${root}/usr/lib (EROFS)`);
      expect(r.err).toContain("stagedroot stage --run 'stagedroot install --sysroot /stagedroot'");
      // Nothing half done: not even the /etc files, which could have been written.
      expect(fs.existsSync(path.join(root, 'etc/stagedroot/environment'))).toBe(false);
      expect(fs.existsSync(path.join(root, 'etc/systemd/system/stagedroot-boot.service'))).toBe(false);
    } finally {
      execaSync('umount', [path.join(root, 'usr')]);
    }
  });

  it('refuses a CLI path that does not exist in the root (units that could never start)', async () => {
    const root = hostRoot();
    await expect(installHost({ root, sysroot: '/sysroot', cli: '/usr/bin/stagedroot', enable: false })).rejects.toMatchObject({ code: 'USAGE', message: expect.stringContaining('/usr/bin/stagedroot is not an executable file') });
    expect(fs.existsSync(path.join(root, 'etc/systemd/system/stagedroot-boot.service'))).toBe(false);
  });

  it('the CLI verb takes --root, --sysroot and --cli, and a relative sysroot is a usage error', async () => {
    const root = hostRoot();
    const ok = await cli(['install', '--root', root, '--sysroot', '/sysroot', '--cli', '/usr/local/bin/stagedroot', '--no-enable']);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('wrote /etc/systemd/system/stagedroot-boot.service');
    expect(ok.err).toContain('warning: there is no sysroot at /sysroot');
    const bad = await cli(['install', '--root', root, '--sysroot', 'sysroot', '--cli', '/usr/local/bin/stagedroot', '--no-enable']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('Expected --sysroot to be an absolute path');
  });

  it('renderUnit only rewrites the template\'s CLI path (and drops a condition on the sysroot)', () => {
    const t = '[Unit]\nConditionPathExists=/sysroot/state.json\nRequiresMountsFor=/sysroot\n[Service]\nEnvironment=OTHER=/sysroot\nExecStart=/usr/bin/stagedroot boot\nExecStartPre=/usr/bin/true\n';
    expect(renderUnit(t, { cli: '/opt/bin/stagedroot', sysroot: '/state' })).toBe('[Unit]\nRequiresMountsFor=/sysroot\n[Service]\nEnvironment=OTHER=/sysroot\nExecStart=/opt/bin/stagedroot boot\nExecStartPre=/usr/bin/true\n');
  });
});
