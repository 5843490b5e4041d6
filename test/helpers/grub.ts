/**
 * GRUB for the boot-entry tests: whether GRUB's own grub-script-check is here, and
 * stagedroot.cfg read back as its menu entries.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execaSync } from 'execa';
import { GRUB_MENU_FILE } from '../../src/state/grub-menu.js';

/** Why the GRUB tests cannot run here (grub-script-check missing), or null. */
export const NO_GRUB_CHECK = ((): string | null => {
  try {
    execaSync('grub-script-check', ['--version']);
    return null;
  } catch {
    return 'grub-script-check is not installed (apt-get install grub-common)';
  }
})();

export interface MenuEntry {
  id: string;
  linux: string;
  args: string[];
  initrd: string;
}

/** The menu entries of `grubDir`'s stagedroot.cfg: id, kernel, its arguments and initrd. */
export function grubMenu(grubDir: string): MenuEntry[] {
  const text = fs.readFileSync(path.join(grubDir, GRUB_MENU_FILE), 'utf8');
  return [...text.matchAll(/^menuentry .* --id (\S+) \{\n([\s\S]*?)^\}/gm)].map((m) => {
    const body = m[2]!;
    const [linux, ...args] = /^\tlinux (.*)$/m.exec(body)![1]!.split(' ');
    return { id: m[1]!, linux: linux!, args, initrd: /^\tinitrd (.*)$/m.exec(body)![1]! };
  });
}
