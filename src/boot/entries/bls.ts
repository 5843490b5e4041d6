/** BLS entries (GRUB with blscfg), one set swapped in by one symlink rename. */
import * as path from 'node:path';
import type { Context } from '../../context.js';
import { readLink } from '../../fs/core/host-paths.js';
import { bootEntry, type BootEntry } from '../../state/boot-entry-text.js';
import { installKernel, removeUnusedKernels, type Bootable } from './kernels.js';
import type { SeenPaths } from './seen-paths.js';

/**
 * BLS entries swapped as ostree swaps them (GRUB with blscfg): kernels copied in by
 * checksum first, the whole new set written into the `loader.N` that `loader` does not
 * point at, then one rename of the `loader` symlink commits it. A crash leaves the old
 * set or the new one, never a mix.
 */
export function writeLoaderSwap(ctx: Context, boot: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const { dfs } = ctx;
  const entries = list.map((b, i) => bootEntry(b.deployment, b.kernel, list.length - i, arg));
  seen.lstat(path.join(boot, 'loader'));
  const active = readLink(path.join(boot, 'loader'));
  const activeDir = active === null ? null : path.join(boot, active, 'entries');
  const same = activeDir !== null && (seen.stat(activeDir)?.isDirectory() ?? false) && sameEntries(activeDir, entries, seen);
  if (!same) {
    for (const b of list) installKernel(ctx, boot, ctx.layout.tree(b.deployment.id), b.kernel);
    const next = active === 'loader.1' ? 'loader.0' : 'loader.1';
    const nextDir = path.join(boot, next);
    dfs.removeTree(nextDir);
    dfs.mkdir(nextDir);
    dfs.mkdir(path.join(nextDir, 'entries'));
    for (const e of entries) dfs.writeFileAtomic(path.join(nextDir, 'entries', e.file), e.text);
    dfs.replaceSymlink(path.join(boot, 'loader'), next);
  }
  // The temp name of a swap a crash interrupted (an older version's: .loader.new-…); the
  // inactive set is rewritten whole by the next swap.
  seen.stat(boot);
  dfs.removeTempLeftovers(boot, (t) => t === 'loader');
  removeUnusedKernels(ctx, boot, new Set(list.map((b) => b.kernel.hash)), seen);
}

function sameEntries(dir: string, entries: BootEntry[], seen: SeenPaths): boolean {
  const names = seen.list(dir).sort();
  if (names.join('\n') !== entries.map((e) => e.file).sort().join('\n')) return false;
  return entries.every((e) => seen.read(path.join(dir, e.file)) === e.text);
}
