import * as path from 'node:path';
import { execa, execaSync } from 'execa';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Shell that runs at boot or builds the boot test: POSIX sh (dracut's module-setup.sh is bash). */
const SH = ['initramfs/stagedroot-prepare-root', 'initramfs/dracut/pre-pivot.sh', 'initramfs/initramfs-tools/hook', 'initramfs/initramfs-tools/local-bottom', 'test/real-boot/build-userspace.sh', 'test/real-boot/make-initramfs.sh', 'test/real-boot/initramfs-init'];
const BASH = ['initramfs/dracut/module-setup.sh'];

const HAVE = ((): boolean => {
  try {
    execaSync('shellcheck', ['--version']);
    return true;
  } catch {
    return false;
  }
})();
if (!HAVE) {
  if (process.env.CI) throw new Error('shellcheck is required in CI (install shellcheck)');
  console.warn('SKIPPED the shellcheck of the initramfs scripts: shellcheck is not installed');
}

describe.skipIf(!HAVE)('the boot-time shell scripts', () => {
  it('are clean under shellcheck (sh for the POSIX ones, bash for dracut\'s module-setup.sh)', async () => {
    for (const [shell, files] of [['sh', SH], ['bash', BASH]] as const) {
      const r = await execa('shellcheck', ['-s', shell, ...files], { cwd: ROOT, reject: false });
      expect(`${r.stdout}${r.stderr}`, `shellcheck -s ${shell}`).toBe('');
      expect(r.exitCode).toBe(0);
    }
  });
});
