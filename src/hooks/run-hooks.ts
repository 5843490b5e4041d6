import * as path from 'node:path';
import { listDir, statPath } from '../fs/core/host-paths.js';
import { describeOutcome, runCommand } from '../util/run-command.js';
import { DEFAULT_HOOK_TIMEOUT_MS, HOOK_OUTPUT_LIMIT, type HookPhase } from './phases.js';

/** What a hook is told, as STAGEDROOT_* environment variables. */
export interface HookContext {
  sysroot: string;
  /** The deployment the phase is about (staged, finalized, booted, failed). */
  id?: string | null;
  label?: string | null;
  /** Its tree (read only: a hook must not change a deployment). */
  tree?: string | null;
  /** The booted deployment's tree. */
  bootedTree?: string | null;
  /** Why (on-failure, on-rollback). */
  reason?: string | null;
}

export interface HookRun {
  phase: HookPhase;
  /** The executable's name in the phase directory. */
  hook: string;
  ok: boolean;
  /** "exited 0", "exited 2", "timed out after 60s". */
  outcome: string;
  /** Combined stdout and stderr, bounded. */
  output: string;
  durationMs: number;
}

/**
 * Runs a phase's hooks for an operation. The sysroot's handle is the one runner (it keeps
 * each phase's runs in hook-runs/PHASE.json); the stage gets it for its pre-stage hooks.
 */
export type PhaseHookRunner = (phase: HookPhase, c: Omit<HookContext, 'sysroot'>) => Promise<HookRun[]>;

export interface HookOptions {
  timeoutMs?: number;
  /** Stop at the first failing hook (pre-* phases). */
  stopOnFailure?: boolean;
}

/** The executables of a phase, in name order (byte order, as `ls` in the C locale); dot files skipped. */
export function hooksOf(hooksDir: string, phase: HookPhase): string[] {
  const dir = path.join(hooksDir, phase);
  return listDir(dir)
    .filter((n) => !n.startsWith('.'))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    .filter((n) => {
      const st = statPath(path.join(dir, n));
      return st !== null && st.isFile() && (st.mode & 0o111) !== 0;
    });
}

/** Runs a phase's hooks one after the other; never throws for a hook's failure (the caller decides). */
export async function runHooks(hooksDir: string, phase: HookPhase, c: HookContext, o: HookOptions = {}): Promise<HookRun[]> {
  const timeoutMs = o.timeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS;
  const env: Record<string, string> = { STAGEDROOT_PHASE: phase, STAGEDROOT_SYSROOT: c.sysroot };
  const add = (k: string, v: string | null | undefined) => {
    if (v !== undefined && v !== null) env[k] = v;
  };
  add('STAGEDROOT_ID', c.id);
  add('STAGEDROOT_LABEL', c.label);
  add('STAGEDROOT_TREE', c.tree);
  add('STAGEDROOT_BOOTED_TREE', c.bootedTree);
  add('STAGEDROOT_REASON', c.reason);
  const runs: HookRun[] = [];
  for (const hook of hooksOf(hooksDir, phase)) {
    const file = path.join(hooksDir, phase, hook);
    const r = await runCommand({ file, args: [], display: hook }, { timeoutMs, env, cwd: '/', outputLimit: HOOK_OUTPUT_LIMIT });
    runs.push({ phase, hook, ok: r.ok, outcome: describeOutcome(r, timeoutMs), output: r.output, durationMs: r.durationMs });
    if (!r.ok && o.stopOnFailure) break;
  }
  return runs;
}

/** "hook pre-stage/10-check exited 3: <output>", for reasons and warnings. */
export function describeHookFailure(r: HookRun): string {
  const out = r.output.trim();
  return `hook ${r.phase}/${r.hook} ${r.outcome}${out ? `: ${out}` : ''}`;
}
