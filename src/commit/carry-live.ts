import type { Context } from '../context.js';
import { applyEtcMerge, NO_UPDATE, planEtcMerge } from '../merge/merge.js';
import { mergedDirs } from '../persistent-dirs/config.js';
import { liveCarriedTransition, mustFind } from '../state/model.js';
import type { BaseState } from '../state/schema.js';
import { applyTransition } from '../store/apply-transition.js';

/**
 * After a live apply, the running root is still the old deployment's tree; its /etc edits
 * that the deployment the apply made current does not hold belong to that deployment: the
 * ones made after the apply, and the ones made before it that its merge left here (it
 * merged only the update's own paths; the edits made before the stage came with the
 * stage's copy of the running tree). They are carried into it as a finalize carries local edits (the same planner and writer, with the live-applied
 * deployment's manifest as the base and no update path: every local change wins), at the
 * next finalize when nothing else is staged, or at the next boot when a crash skipped the
 * shutdown. A boot of anything else (a fallback, an older entry picked) leaves the edits
 * where they are and clears the record. What it did goes to `actions` (the boot reports
 * it), else to the caller's warnings. Returns the state after.
 */
export async function carryLiveEdits(ctx: Context, s: BaseState, when: 'finalize' | 'boot', actions?: string[]): Promise<BaseState> {
  const a = s.activeLive;
  if (!a) return s;
  // At boot, the old tree booted again (picked in the menu) still runs the live config: the next finalize carries.
  if (when === 'boot' && s.booted === a.runningIn) return s;
  if (s.booted !== a.runningIn && s.booted !== a.deployment) return applyTransition(ctx, s, { next: { ...s, activeLive: null }, drop: [] }, 'live-carry');
  const dirs = mergedDirs(s);
  const d = mustFind(s, a.deployment);
  const plan = await planEtcMerge(ctx.layout, a.deployment, a.deployment, dirs, { running: a.runningIn, update: NO_UPDATE });
  const sha = plan.actions.length === 0 ? d.manifestSha256 : applyEtcMerge(ctx, plan, dirs, d.manifestSha256);
  const next = applyTransition(ctx, s, liveCarriedTransition(s, sha), 'live-carry');
  ctx.dfs.unlink(ctx.layout.mergeMarker(a.deployment));
  if (plan.carried > 0) {
    const did = `carried ${plan.carried} local change${plan.carried === 1 ? '' : 's'} of the running /etc into live-applied deployment ${a.deployment}`;
    if (actions) actions.push(did);
    else ctx.warn(did);
  }
  return next;
}
