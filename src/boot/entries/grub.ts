/** GRUB's own menu file (GRUB without blscfg). */
import * as path from 'node:path';
import type { Context } from '../../context.js';
import { GRUB_MENU_FILE, grubMenu } from '../../state/grub-menu.js';
import type { Bootable } from './kernels.js';
import type { SeenPaths } from './seen-paths.js';

/**
 * GRUB without blscfg: stagedroot's own menu file beside grub.cfg, one atomic write
 * (temp + fsync + rename + fsync of the directory on the boot filesystem); grub.cfg
 * itself is never rewritten here. The kernels are read from the deployments' trees.
 */
export function writeGrubMenu(ctx: Context, grubDir: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const text = grubMenu(list, arg, arg);
  const file = path.join(grubDir, GRUB_MENU_FILE);
  if (seen.read(file) !== text) ctx.dfs.writeFileAtomic(file, text);
  seen.stat(grubDir);
  ctx.dfs.removeTempLeftovers(grubDir, (t) => t === GRUB_MENU_FILE);
}
