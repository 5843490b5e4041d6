import type { Context } from '../context.js';
import { exists } from '../fs/durable.js';

/** Moves deployment directories to trash/ (one atomic rename each), then deletes them. */
export function removeDeployments(ctx: Context, ids: readonly string[]): void {
  const { layout, dfs } = ctx;
  for (const id of ids) {
    const dir = layout.deployment(id);
    if (!exists(dir)) continue;
    dfs.mkdir(layout.trashDir);
    const trash = layout.trashEntry(id);
    dfs.rename(dir, trash);
    dfs.removeTree(trash);
  }
}
