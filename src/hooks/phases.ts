/**
 * The phases at which the executables in `<sysroot>/hooks/PHASE/` run (Mender's state
 * scripts, RAUC's handlers): a failing `pre-*` hook stops its step, other failures are
 * reported and change nothing.
 */
export const HOOK_PHASES = ['pre-stage', 'post-stage', 'pre-finalize', 'post-finalize', 'post-boot', 'on-failure', 'on-rollback'] as const;
export type HookPhase = (typeof HOOK_PHASES)[number];

export const DEFAULT_HOOK_TIMEOUT_MS = 60_000;
/** Output kept per hook (first and last halves). */
export const HOOK_OUTPUT_LIMIT = 16 * 1024;
