import type { Context } from '../context.js';
import { exists, listDir } from '../fs/core/host-paths.js';
import { readMarker, redoEtcMerge } from '../merge/merge.js';
import { applySharedOps, clearSharedStamps } from '../persistent-dirs/apply.js';
import { sharedDirs } from '../persistent-dirs/config.js';
import type { BaseState } from '../state/schema.js';
import { saveState } from '../store/state-file.js';

/**
 * The last steps of a finalize, after its pointer swap (the commit point): the kept
 * local versions move into place (kept/ID.partial → kept/ID), the update's entries under
 * shared directories are applied, var/.updated is cleared; then `finishPending` is
 * cleared. Each step is idempotent: recovery repeats them after a crash.
 */
export function finishFinalize(ctx: Context, s: BaseState): BaseState {
  const id = s.finishPending;
  if (id === null || id === undefined) return s;
  const { layout, dfs } = ctx;
  if (id === s.current) {
    if (exists(layout.kept(id, true))) {
      dfs.mkdir(layout.keptRoot, 0o700);
      dfs.removeTree(layout.kept(id)); // only a leftover of an interrupted earlier move
      dfs.rename(layout.kept(id, true), layout.kept(id));
    }
    applySharedOps(ctx, id, sharedDirs(s));
    clearSharedStamps(ctx, sharedDirs(s));
  }
  const next = { ...s, finishPending: null };
  saveState(layout, dfs, { ...next, intent: null });
  return next;
}

/**
 * What recovery does about finalize's merge after a crash: completes the last steps of
 * a finalize whose swap happened; redoes a merge interrupted in a still-staged
 * deployment (its tree and manifest agree again, the manifest's checksum recorded);
 * drops the marker of a merge that completed; removes kept copies of a finalize that
 * never swapped (the next finalize makes them again).
 */
export function recoverFinalize(ctx: Context, state: BaseState, actions: string[]): BaseState {
  const { layout, dfs } = ctx;
  let s = state;
  for (const d of s.deployments) {
    const marker = readMarker(layout, d.id);
    if (marker === null) continue;
    const carry = marker.carry === true && d.id === s.activeLive?.deployment;
    if (d.id === s.staged || carry) {
      const sha = redoEtcMerge(ctx, d.id, marker, d.manifestSha256);
      s = { ...s, deployments: s.deployments.map((x) => (x.id === d.id ? { ...x, manifestSha256: sha } : x)), ...(carry ? { activeLive: null } : {}) };
      saveState(layout, dfs, { ...s, intent: null });
      actions.push(carry ? `completed the interrupted carry of local edits into live-applied deployment ${d.id}` : `completed the interrupted merge into staged deployment ${d.id}`);
    }
    dfs.unlink(layout.mergeMarker(d.id));
  }
  if (s.finishPending !== null && s.finishPending !== undefined) {
    const id = s.finishPending;
    s = finishFinalize(ctx, s);
    actions.push(`completed the interrupted finalize of ${id} (kept copies, shared directories)`);
  }
  for (const n of listDir(layout.keptRoot)) {
    if (n.endsWith('.partial')) {
      dfs.removeTree(`${layout.keptRoot}/${n}`);
      actions.push(`removed kept copies of an unfinished finalize: kept/${n}`);
    }
  }
  return s;
}
