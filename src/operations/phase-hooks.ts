import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { writeJson } from '../fs/trees/durable.js';
import { readLink } from '../fs/core/host-paths.js';
import type { HookPhase } from '../hooks/phases.js';
import type { HookContext, HookRun } from '../hooks/run-hooks.js';
import { effectiveState } from '../state/model.js';
import { loadState } from '../store/state-file.js';

export interface HookTimeout {
  /** A hook's time limit (default: hooks/phases.ts). */
  hookTimeoutMs?: number;
}

/**
 * Runs a phase's hooks (hooks/PHASE/, name order) and keeps what they did in
 * hook-runs/PHASE.json; a failure is a warning (post-*, on-*) and changes nothing. The
 * booted tree is read when they run: after a boot, it is the deployment just booted.
 */
export async function runPhaseHooks(ctx: Context, phase: HookPhase, c: Omit<HookContext, 'sysroot'>, o: HookTimeout = {}): Promise<HookRun[]> {
  const { layout, dfs } = ctx;
  const booted = effectiveState(loadState(layout).state, layout.idFromLink(readLink(layout.currentLink))).booted;
  const { runHooks, describeHookFailure } = await import('../hooks/run-hooks.js');
  const pre = phase.startsWith('pre-');
  const runs = await runHooks(layout.hooksDir, phase, { sysroot: layout.root, bootedTree: booted ? layout.tree(booted) : null, ...c }, { timeoutMs: o.hookTimeoutMs, stopOnFailure: pre });
  if (runs.length > 0) {
    dfs.mkdir(layout.hookRunsDir);
    writeJson(dfs, `${layout.hookRunsDir}/${phase}.json`, { phase, at: ctx.now().toISOString(), ...c, runs });
  }
  for (const r of runs) if (!r.ok && !pre) ctx.warn(describeHookFailure(r));
  return runs;
}

/** A pre-* phase's hooks, the first that fails stopping the operation: `code` and `stopped(failure)` say how. */
export async function requirePhaseHooks(ctx: Context, phase: Extract<HookPhase, `pre-${string}`>, c: Omit<HookContext, 'sysroot'>, stop: { code: 'HOOK_FAILED' | 'HOOK_REJECTED'; message: (failure: string) => string; value?: string }, o: HookTimeout = {}): Promise<HookRun[]> {
  const runs = await runPhaseHooks(ctx, phase, c, o);
  const bad = runs.find((r) => !r.ok);
  if (bad) {
    const { describeHookFailure } = await import('../hooks/run-hooks.js');
    throw new StagedrootError(stop.code, stop.message(describeHookFailure(bad)), { path: `hooks/${phase}/${bad.hook}`, ...(stop.value === undefined ? {} : { value: stop.value }) });
  }
  return runs;
}
