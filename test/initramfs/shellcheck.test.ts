import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tool } from '../helpers/tools.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Shell that runs at boot or builds the VM tests' machines: POSIX sh (dracut's module-setup.sh is bash); -x follows what they source. */
const SH = ['initramfs/stagedroot-prepare-root', 'initramfs/grub/09_stagedroot', 'initramfs/dracut/pre-pivot.sh', 'initramfs/initramfs-tools/hook', 'initramfs/initramfs-tools/local-bottom', 'test/real-boot/build-userspace.sh', 'test/crash-replay/build-userspace.sh', 'test/vm/debian-mirror.sh'];
const BASH = ['initramfs/dracut/module-setup.sh'];

describe('the boot-time shell scripts', () => {
  it('are clean under shellcheck (sh for the POSIX ones, bash for dracut\'s module-setup.sh)', async () => {
    for (const [shell, files] of [['sh', SH], ['bash', BASH]] as const) {
      const r = await tool('shellcheck', ['-x', '-s', shell, ...files], { cwd: ROOT, reject: false });
      expect(`${r.stdout}${r.stderr}`, `shellcheck -s ${shell}`).toBe('');
      expect(r.exitCode).toBe(0);
    }
  });
});
