import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { exists, isDirectory, listDir, readLink } from '../fs/core/host-paths.js';
import { cleanLockLeftovers } from '../fs/lock/writer-lock.js';
import { dropIds, effectiveState } from '../state/model.js';
import type { BaseState } from '../state/schema.js';
import { syncBootEntries } from '../boot/entries/sync.js';
import { syncBootFiles } from './boot-files.js';
import { removeDeployments } from './remove-deployments.js';
import { loadState, saveState } from './state-file.js';

/**
 * An operation's crash-recovery step: completes (or undoes) what a crash cut short, once
 * the state and the pointer are settled. The operations declare theirs (src/operations);
 * recovery runs them in order, so it never imports an operation from above.
 */
export interface ResumeStep {
  /** The operation it resumes, in the words recovery reports. */
  operation: string;
  resume(ctx: Context, state: BaseState, actions: string[]): BaseState;
}

export interface RecoveryReport {
  state: BaseState;
  /** What recovery did, in words (empty when the sysroot was consistent). */
  actions: string[];
}

/**
 * Brings a sysroot back to a consistent state after a crash at any point. Called with
 * the writer lock held. Resolves a pointer swap in progress by looking at the `current`
 * symlink, re-points a missing or wrong symlink, restores a corrupt state.json from its
 * copy (moving the broken file aside), runs each operation's resume step (`steps`, in
 * order), and removes leftovers of interrupted work.
 */
export function recover(ctx: Context, steps: readonly ResumeStep[]): RecoveryReport {
  const { layout, dfs } = ctx;
  const actions: string[] = [];
  const loaded = loadState(layout);
  if (loaded.recoveredFrom) {
    if (exists(layout.stateFile)) {
      const aside = layout.brokenStateAside(ctx.now());
      dfs.rename(layout.stateFile, aside);
      actions.push(`state.json was unreadable (${loaded.brokenReason}); moved it to ${aside} and restored the last good copy`);
    } else {
      actions.push(`state.json was missing; restored the last good copy`);
    }
  }
  const raw = loaded.state;
  const linkId = layout.idFromLink(readLink(layout.currentLink));
  let state = effectiveState(raw, linkId);
  let dirty = raw.intent !== null || loaded.recoveredFrom !== undefined;
  if (raw.intent !== null) {
    actions.push(linkId === raw.intent.next.current ? `completed the interrupted ${raw.intent.op}` : `rolled back the interrupted ${raw.intent.op} (the pointer had not moved)`);
  }

  // Records whose tree is gone cannot be used: drop them (never the current one).
  const missing = state.deployments.filter((d) => !isDirectory(layout.tree(d.id)));
  for (const d of missing) {
    if (d.id === state.current) {
      throw new StagedrootError('STATE_CORRUPT', `The current deployment ${d.id} has no tree at ${layout.tree(d.id)}`, { path: layout.tree(d.id) });
    }
    actions.push(`dropped deployment ${d.id}: its tree is missing`);
  }
  if (missing.length > 0) {
    const gone = new Set(missing.map((d) => d.id));
    const clear = (id: string | null): string | null => (id !== null && gone.has(id) ? null : id);
    state = dropIds({ ...state, staged: clear(state.staged), booted: clear(state.booted), rollback: clear(state.rollback) }, [...gone]);
    dirty = true;
  }
  if (dirty) saveState(layout, dfs, { ...state, intent: null });

  // Entries before the pointer, as in every transition (a pointer that stays gets its
  // entries synced below, after the last state change: one pass of the boot directory).
  if (linkId !== state.current) {
    syncBootEntries(ctx, state);
    dfs.replaceSymlink(layout.currentLink, layout.linkTarget(state.current));
    actions.push(`pointed current at deployment ${state.current}`);
  }

  // What the operations left half done (finalize's merge and last steps, ...).
  for (const step of steps) state = step.resume(ctx, state, actions);

  // Leftovers: unfinished stages, half-removed deployments, unknown deployment dirs, temp files.
  const known = new Set(state.deployments.map((d) => d.id));
  const strays = listDir(layout.deployDir).filter((n) => !known.has(n));
  if (strays.length > 0) {
    removeDeployments(ctx, strays);
    actions.push(`removed unrecorded deployment dirs: ${strays.join(', ')}`);
  }
  // Kept copies of deployments that are gone (removal interrupted between the tree and them).
  const keptStrays = listDir(layout.keptRoot).filter((n) => layout.isDeploymentId(n) && !known.has(n));
  if (keptStrays.length > 0) {
    removeDeployments(ctx, keptStrays);
    actions.push(`removed kept copies of removed deployments: ${keptStrays.map((n) => `kept/${n}`).join(', ')}`);
  }
  for (const dir of [layout.workDir, layout.trashDir]) {
    const names = listDir(dir);
    if (names.length === 0) continue;
    for (const n of names) dfs.removeTree(`${dir}/${n}`);
    actions.push(`removed leftovers in ${dir.slice(layout.root.length + 1)}/: ${names.join(', ')}`);
  }
  // Writes a crash cut short (one temp scheme, and the names older versions used), in
  // every directory of the sysroot's own that is written via a temp. boot-tries/ is
  // syncBootFiles's, the boot entries' directories syncBootEntries's, kept/ copyOut's.
  const tempDirs = [layout.root, layout.hookRunsDir, layout.trustedKeysDir, ...state.deployments.map((d) => layout.deployment(d.id))];
  for (const dir of tempDirs) {
    for (const n of dfs.removeTempLeftovers(dir, () => true)) actions.push(`removed temp file ${dir === layout.root ? n : `${dir.slice(layout.root.length + 1)}/${n}`}`);
  }
  // The initramfs's files follow the recovered state (a crash can leave the next state's
  // files written before the pointer moved, or the old state's not yet removed).
  syncBootFiles(ctx, state, { tries: 'keep', cleanup: true });
  syncBootEntries(ctx, state);
  cleanLockLeftovers(layout.root, ctx.faults);
  for (const a of actions) ctx.warn(`recovery: ${a}`);
  return { state, actions };
}
