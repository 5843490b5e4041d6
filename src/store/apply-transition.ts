import type { Context } from '../context.js';
import { verifyTransition } from '../state/invariants.js';
import type { Transition } from '../state/model.js';
import type { BaseState } from '../state/schema.js';
import { syncBootEntries } from '../boot/entries/sync.js';
import { syncBootFiles } from './boot-files.js';
import { removeDeployments } from './remove-deployments.js';
import { saveState } from './state-file.js';

/**
 * Makes a transition durable. When `current` changes, the swap is three steps, each
 * one atomic rename: (1) the state with an intent naming the next state, (2) the
 * `current` symlink (the commit point), (3) the next state. A crash between them is
 * resolved by looking at the symlink (see effectiveState). Dropped deployments are
 * removed only after the new state is durable; a crash leaves them as leftovers that
 * recovery removes. A transition that breaks an invariant is refused before anything is
 * written (INVARIANT_VIOLATED; see state/invariants.ts).
 *
 * The initramfs's files (boot tries, fallback) and the bootloader's entries for the next
 * state are written before the pointer moves and before the state, so a deployment under assessment is counted from
 * its first boot and a crash never leaves more tries on disk than the state allows; what
 * the old state needed is removed only after the next state is durable. `tries: 'write'`
 * (the boot hook) sets the tries file from the state.
 *
 * `finish`: the steps that complete the transition after its commit point (finalize's
 * last steps, finishFinalize), which write the state themselves. When the pointer moves,
 * the state with the intent already stands for the next one (a crash after the swap is
 * recovered to it and the steps resumed, see effectiveState and recoverFinalize), so they
 * run right after the swap and theirs is the one state written after it, not the next
 * state first and theirs again. They must write the state and be safe to repeat.
 */
export function applyTransition(ctx: Context, from: BaseState, given: Transition, op: string, o: { tries?: 'keep' | 'write'; finish?: (next: BaseState) => BaseState } = {}): BaseState {
  const { layout, dfs } = ctx;
  const t = withLiveRecord(given);
  verifyTransition(from, t, op);
  const moves = t.next.current !== from.current;
  if (moves) saveState(layout, dfs, { ...from, intent: { op, next: t.next } });
  // Tries only ever go down: written before the state that says so, a crash leaves the
  // file at or below the state's count (recovery keeps it), never above.
  syncBootFiles(ctx, t.next, { tries: o.tries ?? 'keep', cleanup: false });
  // The bootloader's entries before the pointer: each names the deployment it boots, so
  // whichever set a crash leaves, no entry pairs a kernel with another deployment's tree
  // (recovery rewrites them for the state it settles on).
  syncBootEntries(ctx, t.next);
  if (moves) dfs.replaceSymlink(layout.currentLink, layout.linkTarget(t.next.current));
  let next = t.next;
  if (moves && o.finish !== undefined) {
    // Past the pointer the intent on disk already means t.next (effectiveState, recovery):
    // the finish steps run now and write the one state after them, instead of t.next first.
    next = o.finish(t.next);
  } else {
    saveState(layout, dfs, { ...t.next, intent: null });
    if (o.finish !== undefined) next = o.finish(t.next);
  }
  syncBootFiles(ctx, next, { tries: 'keep', cleanup: true });
  removeDeployments(ctx, t.drop);
  return next;
}

/**
 * A live apply's record holds only while its deployment is current: a rollback or a
 * mark-bad after it sends the next boot back to the tree that runs (its /etc edits are
 * there), and nothing is left to carry.
 */
function withLiveRecord(t: Transition): Transition {
  const a = t.next.activeLive;
  return a && a.deployment !== t.next.current ? { ...t, next: { ...t.next, activeLive: null } } : t;
}
