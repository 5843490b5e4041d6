import type { Context } from '../context.js';
import { exists, listDir } from '../fs/core/host-paths.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { treeTasks } from '../fs/trees/tasks.js';

/**
 * Moves deployment directories to trash/ (one atomic rename each), each followed by the
 * local versions a merge into it kept aside (kept/ID): kept copies live as long as
 * their deployment. The contents are deleted by emptyTrash, which every writer runs
 * before it releases the lock; a crash in between leaves them to recovery, which also
 * removes the kept copies of any deployment the state no longer lists.
 */
export function removeDeployments(ctx: Context, ids: readonly string[]): void {
  const { layout, dfs } = ctx;
  for (const id of ids) {
    for (const [dir, entry] of [
      [layout.deployment(id), layout.trashEntry(id)],
      [layout.kept(id), layout.trashEntry(`kept-${id}`)],
    ] as const) {
      if (!exists(dir)) continue;
      dfs.mkdir(layout.trashDir);
      dfs.rename(dir, entry);
    }
  }
}

/**
 * Deletes what is in trash/, on a worker thread (a 100,000-file tree takes seconds to
 * unlink; a btrfs subvolume goes in one call): the caller's event loop keeps running.
 */
export async function emptyTrash(ctx: Context): Promise<number> {
  const names = listDir(ctx.layout.trashDir);
  for (const n of names) {
    await runTreeTask(treeTasks.removeTree, { path: `${ctx.layout.trashDir}/${n}` }, { faults: ctx.faults });
  }
  return names.length;
}
