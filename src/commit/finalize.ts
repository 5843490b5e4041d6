import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { exists, fileSha256, readText } from '../fs/durable.js';
import { verifyTree } from '../fs/verify-tree.js';
import { parseDelta, verifyDelta } from '../fs/delta.js';
import { finalizeFailed, finalizeTransition, mustFind } from '../state/model.js';
import type { BaseState } from '../state/schema.js';
import { applyTransition } from '../store/apply-transition.js';

export interface FinalizeOptions {
  /** Verify the whole staged tree, not only the manifest and the update's delta. */
  fullVerify?: boolean;
}

export type FinalizeResult =
  | { finalized: true; id: string; previous: string }
  | { finalized: false; reason: 'nothing-staged' | 'locked'; id?: string };

/**
 * The shutdown hook: the staged deployment becomes current by one atomic symlink swap.
 * Before trusting it, what the update changed (its delta) is checked against the tree:
 * O(change), so shutdown stays fast however large the tree (`fullVerify` checks the
 * manifest's checksum and the whole tree);
 * a mismatch is recorded durably as a finalize failure, and current stays as it was.
 */
export function finalize(ctx: Context, s: BaseState, o: FinalizeOptions = {}): FinalizeResult {
  if (s.staged === null) return { finalized: false, reason: 'nothing-staged' };
  const staged = mustFind(s, s.staged);
  if (staged.locked) return { finalized: false, reason: 'locked', id: staged.id };
  const problem = checkStaged(ctx, staged.id, staged.manifestSha256, o.fullVerify ?? false);
  if (problem !== null) {
    const failure = { id: staged.id, label: staged.label, phase: 'finalize' as const, reason: problem, at: ctx.now().toISOString(), code: 'FINALIZE_FAILED' };
    applyTransition(ctx, s, finalizeFailed(s, failure), 'finalize-failed');
    throw new StagedrootError('FINALIZE_FAILED', `Finalize of deployment ${staged.id} (${staged.label}) failed: ${problem}; current stays ${s.current}`, { value: staged.id });
  }
  applyTransition(ctx, s, finalizeTransition(s), 'finalize');
  return { finalized: true, id: staged.id, previous: s.current };
}

/** Why the staged tree cannot be trusted, or null. */
function checkStaged(ctx: Context, id: string, manifestSha256: string | null, full: boolean): string | null {
  const { layout } = ctx;
  if (!exists(layout.tree(id))) return `its tree ${layout.tree(id)} is missing`;
  if (!exists(layout.manifest(id))) return `its manifest ${layout.manifest(id)} is missing`;
  let drift;
  if (full) {
    if (manifestSha256 !== null && fileSha256(layout.manifest(id)) !== manifestSha256) return `its manifest ${layout.manifest(id)} was modified after staging`;
    drift = verifyTree(layout.tree(id), layout.manifest(id));
  } else {
    const text = readText(layout.delta(id));
    if (text === null) return `its delta ${layout.delta(id)} is missing`;
    try {
      drift = verifyDelta(layout.tree(id), parseDelta(text, layout.delta(id)));
    } catch (err) {
      return (err as Error).message;
    }
  }
  if (drift.length === 0) return null;
  const shown = drift.slice(0, 5).map((d) => `${d.path} (${d.kind})`).join(', ');
  return `the staged tree no longer matches its manifest: ${shown}${drift.length > 5 ? ` and ${drift.length - 5} more` : ''}`;
}
