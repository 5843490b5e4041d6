import type { Context } from '../context.js';
import { verifyTransition } from '../state/invariants.js';
import type { Transition } from '../state/model.js';
import type { BaseState } from '../state/schema.js';
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
 */
export function applyTransition(ctx: Context, from: BaseState, t: Transition, op: string): BaseState {
  const { layout, dfs } = ctx;
  verifyTransition(from, t, op);
  if (t.next.current !== from.current) {
    saveState(layout, dfs, { ...from, intent: { op, next: t.next } });
    dfs.replaceSymlink(layout.currentLink, layout.linkTarget(t.next.current));
  }
  saveState(layout, dfs, { ...t.next, intent: null });
  removeDeployments(ctx, t.drop);
  return t.next;
}
