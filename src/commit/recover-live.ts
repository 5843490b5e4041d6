import { currentBootId, HOST_SYSTEMCTL, systemctlSync, undoSteps } from '../activation/live/actions.js';
import { readJournal } from '../activation/live/journal.js';
import { restoreEntries } from '../activation/live/write-entries.js';
import type { Context } from '../context.js';
import { exists } from '../fs/core/host-paths.js';
import type { BaseState } from '../state/schema.js';
import { keepForRollback } from './rollback-tree.js';

/**
 * What recovery does about a live apply a crash cut short (the resume step of apply-live):
 * when its swap happened (the deployment is current and active live) it is complete and
 * the journal goes; otherwise it is undone: every path back from its before-image, and,
 * in the same boot, one daemon-reload and the services already actioned run again so that
 * they read the old files (after a reboot none runs the new ones: the files suffice).
 * The node is then wholly on the old configuration, the deployment still staged. A journal
 * that cannot be read back whole is LIVE_JOURNAL_CORRUPT: nothing is guessed.
 */
export function recoverLive(ctx: Context, s: BaseState, actions: string[]): BaseState {
  const dir = ctx.layout.liveApply;
  if (!exists(dir)) return s;
  const j = readJournal(dir);
  if (j === null) {
    // Cut short before its intent was written: nothing in the running root changed.
    ctx.dfs.removeTree(dir);
    actions.push('removed the before-images of a live apply that had not started');
    return s;
  }
  if (s.current === j.deployment && s.activeLive?.deployment === j.deployment) {
    keepForRollback(ctx, dir, s.activeLive.runningIn);
    actions.push(`completed the live apply of ${j.deployment} (its journal kept for the rollback tree ${s.activeLive.runningIn})`);
    return s;
  }
  restoreEntries(j.root, dir, j.entries, ctx.faults);
  const sameBoot = j.bootId !== undefined && j.bootId === currentBootId();
  const problems: string[] = [];
  if (sameBoot) {
    const m = j.services ? { command: j.services } : HOST_SYSTEMCTL;
    for (const args of undoSteps(j)) {
      const p = systemctlSync(m, args);
      if (p !== null) problems.push(p);
    }
  }
  ctx.dfs.removeTree(dir);
  actions.push(`undid the interrupted live apply of ${j.deployment}: ${j.entries.length} path${j.entries.length === 1 ? '' : 's'} restored${sameBoot ? '' : ' (after a reboot: no service to restart)'}${problems.length ? `; could not: ${problems.join(', ')}` : ''}`);
  if (problems.length) ctx.warn(`undoing the live apply of ${j.deployment}: ${problems.join(', ')}`);
  return s;
}
