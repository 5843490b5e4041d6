import * as path from 'node:path';
import { currentBootId } from '../activation/live/actions.js';
import { readJournal } from '../activation/live/journal.js';
import { restoreEntries } from '../activation/live/write-entries.js';
import type { Context } from '../context.js';
import { listDir } from '../fs/core/host-paths.js';
import type { BaseState } from '../state/schema.js';

/*
 * A live apply writes the update into the running tree, which is the deployment that becomes
 * the rollback. Left so, a rollback would boot the old OS with the new configuration. So the
 * apply's journal (the before-image of every path it wrote) is kept, after its commit, under
 * live-undo/<running id>/<n>, and once that tree no longer runs (the machine booted another
 * deployment) its paths are put back: the rollback boots what it had before the live apply.
 *
 * A directory being restored is renamed `<n>.done` before it is removed, so that a crash
 * mid-removal never leaves a journal whose before-images are half gone.
 */

const DONE = '.done';

/** Keeps a completed live apply's journal `dir` for the tree it was applied into (`running`), after any earlier one. */
export function keepForRollback(ctx: Context, dir: string, running: string): void {
  const root = ctx.layout.liveUndo(running);
  ctx.dfs.mkdir(ctx.layout.liveUndoRoot, 0o700);
  ctx.dfs.mkdir(root, 0o700);
  const next = Math.max(0, ...applies(listDir(root)).map((n) => n + 1));
  ctx.dfs.rename(dir, path.join(root, String(next)));
}

/** The kept applies of one tree (from its directory's names), oldest first. */
function applies(names: string[]): number[] {
  return names
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
}

/**
 * The resume step (and the boot's last step): puts back the before-images of every tree
 * that no longer runs, newest apply first. A tree whose live edits are not carried yet
 * (activeLive still runs in it) or that still runs in the boot of the apply waits; one
 * booted again in a later boot (a rollback before the reboot, or an entry picked in the
 * menu) has run with those files since, which are its own now: the record goes. So does
 * the record of a removed deployment.
 *
 * Whether the tree was booted again is read from `booted`, which is this boot's only once
 * the boot hook has recorded it: `o.bootRecorded` says the caller knows (the boot hook,
 * after its record). Recovery does not: at the boot hook's own recovery, before its
 * record, `booted` is still the last boot's, the very tree the apply ran in, and a clean
 * shutdown's finalize has carried the edits already; taking that for "booted again" would
 * drop the record and leave the rollback with the live-applied files. There the record
 * waits for the boot hook's step.
 */
export function restoreRollbackTrees(ctx: Context, s: BaseState, actions: string[], o: { bootRecorded?: boolean } = {}): BaseState {
  const { layout, dfs } = ctx;
  for (const id of listDir(layout.liveUndoRoot)) {
    const root = layout.liveUndo(id);
    if (s.activeLive?.runningIn === id) continue;
    const names = listDir(root);
    const kept = applies(names);
    if (s.deployments.every((d) => d.id !== id)) {
      dfs.removeTree(root);
      actions.push(`removed the live-apply before-images of removed deployment ${id}`);
      continue;
    }
    if (s.booted === id) {
      const last = kept.length ? readJournal(path.join(root, String(kept[kept.length - 1]))) : null;
      const now = currentBootId();
      if (last?.bootId === undefined || now === null || last.bootId === now) continue; // still the running tree
      if (o.bootRecorded !== true) continue; // another boot, not recorded yet: the boot hook decides
      dfs.removeTree(root);
      actions.push(`dropped the live-apply before-images of ${id}: it was booted again with the live-applied files`);
      continue;
    }
    let paths = 0;
    for (const name of names.filter((n) => n.endsWith(DONE))) dfs.removeTree(path.join(root, name));
    for (const n of [...kept].reverse()) {
      const dir = path.join(root, String(n));
      const j = readJournal(dir);
      if (j !== null) {
        restoreEntries(layout.tree(id), dir, j.entries, ctx.faults);
        paths += j.entries.length;
      }
      dfs.rename(dir, `${dir}${DONE}`);
      dfs.removeTree(`${dir}${DONE}`);
    }
    dfs.removeTree(root);
    actions.push(`restored ${paths} live-applied path${paths === 1 ? '' : 's'} of deployment ${id} as they were before the apply (it no longer runs)`);
  }
  return s;
}
