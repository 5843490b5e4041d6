import type { Context } from '../context.js';
import { exists, listDir, readLink, readText } from '../fs/core/host-paths.js';
import { bootFiles } from '../state/model.js';
import type { BaseState } from '../state/schema.js';

/**
 * Keeps the files the initramfs reads in line with the state: `boot-tries/ID` for the
 * current deployment while it is under assessment, the `fallback` symlink to what it
 * boots when those tries are used up, and the `rollback` symlink (its last resort when
 * the deployment it was to boot is broken). Each is one atomic rename, so the initramfs (which
 * reads them without the lock, at any power cut) sees the old or the new, never a mix.
 *
 * `tries`: 'keep' leaves an existing tries file as it is when it is at or below the
 * state's count (the initramfs counts down in it between two transitions); 'write' sets it from the state (the boot hook, right after it
 * took the count from the initramfs's record or counted itself). `cleanup`: remove what
 * the state no longer implies (only after the state naming the change is durable).
 */
export function syncBootFiles(ctx: Context, s: BaseState, o: { tries: 'keep' | 'write'; cleanup: boolean }): void {
  const { layout, dfs } = ctx;
  const want = bootFiles(s);
  if (want.tries !== null) {
    dfs.mkdir(layout.bootTriesDir);
    const file = layout.bootTriesFile(want.tries.id);
    const text = readText(file);
    const onDisk = text !== null && /^\d+\n?$/.test(text) ? Number(text) : null;
    if (o.tries === 'write' || onDisk === null || onDisk > want.tries.left) dfs.writeFileAtomic(file, `${want.tries.left}\n`);
  }
  for (const [link, id] of [[layout.fallbackLink, want.fallback], [layout.rollbackLink, want.rollback]] as const) {
    if (id !== null && readLink(link) !== layout.linkTarget(id)) dfs.replaceSymlink(link, layout.linkTarget(id));
  }
  if (!o.cleanup) return;
  for (const name of listDir(layout.bootTriesDir)) {
    if (want.tries === null || name !== want.tries.id) dfs.unlink(`${layout.bootTriesDir}/${name}`);
  }
  for (const [link, id] of [[layout.fallbackLink, want.fallback], [layout.rollbackLink, want.rollback]] as const) {
    if (id === null && (exists(link) || readLink(link) !== null)) dfs.unlink(link);
  }
}
