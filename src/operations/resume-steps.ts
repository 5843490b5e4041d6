import { recoverFinalize } from '../commit/finish.js';
import { recoverLive } from '../commit/recover-live.js';
import { restoreRollbackTrees } from '../commit/rollback-tree.js';
import { upgradeSharedLayout } from '../persistent-dirs/upgrade.js';
import type { ResumeStep } from '../store/recover.js';

/**
 * Every pending `resume`, in the order recovery runs them (after the state and the pointer
 * are settled, before leftovers are removed): a sysroot from before the shared directories
 * is upgraded first, so that finalize's resume finds them.
 */
export const RESUME_STEPS: readonly ResumeStep[] = [
  { operation: 'shared-directory layout upgrade', resume: upgradeSharedLayout },
  // Before finalize's: a merge redone into a staged deployment must read the running /etc as it was before the live apply.
  { operation: 'apply-live', resume: recoverLive },
  // After it: a completed apply's journal has just been kept for the tree it wrote into.
  { operation: 'live-apply rollback tree', resume: restoreRollbackTrees },
  { operation: 'finalize', resume: recoverFinalize },
];
