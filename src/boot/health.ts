import * as path from 'node:path';
import { StagedrootError } from '../errors.js';
import { isDirectory, listDir, statPath } from '../fs/core/host-paths.js';
import { checkTimeoutMs } from '../util/options.js';
import { describeOutcome, parseCommand, runCommand, type CommandSpec } from '../util/run-command.js';

/**
 * Health checks, as greenboot has them: `required` checks must pass for the booted
 * deployment to be marked good; `wanted` checks may fail (the failure is recorded, the
 * verdict is not changed). A check is a command, or every executable in a directory
 * (`required.d/`, `wanted.d/`, run in name order). Each runs with a timeout, its
 * output captured and bounded.
 */
export type HealthKind = 'required' | 'wanted';

export interface HealthCheck {
  /** "cmd --flag" (split like a shell would, but no shell runs) or [file, ...args]. */
  command: string | readonly string[];
  name?: string;
  timeoutMs?: number;
}

export interface HealthOptions {
  required?: readonly (HealthCheck | string)[];
  wanted?: readonly (HealthCheck | string)[];
  /** Directories of executables that must pass (a missing directory is an error: a typo must not pass silently). */
  requiredDirs?: readonly string[];
  /** Directories of executables that may fail. */
  wantedDirs?: readonly string[];
  /** Directories whose absence means "no checks" (the built-in defaults of the CLI). */
  optionalDirs?: { required?: readonly string[]; wanted?: readonly string[] };
  /** Per check, unless the check sets its own (default 5 minutes, as greenboot's unit allows). */
  timeoutMs?: number;
  /** Extra environment for the checks. */
  env?: Record<string, string>;
  signal?: AbortSignal;
  /** Called as each check finishes (the CLI prints progress with it). */
  onResult?: (r: CheckResult) => void;
}

export interface CheckResult {
  name: string;
  kind: HealthKind;
  ok: boolean;
  /** "exited 0", "exited 1", "timed out after 5s", "not found (ENOENT)". */
  outcome: string;
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
  /** Combined stdout and stderr, bounded. */
  output: string;
}

export interface HealthReport {
  /** Every required check passed. */
  ok: boolean;
  results: CheckResult[];
  failedRequired: CheckResult[];
  failedWanted: CheckResult[];
}

export const DEFAULT_HEALTH_TIMEOUT_MS = 300_000;

interface Planned {
  kind: HealthKind;
  name: string;
  cmd: CommandSpec;
  timeoutMs: number;
}

/** Executables in a directory, in name order (non-executable files and subdirectories are not checks). */
function dirChecks(dir: string, kind: HealthKind, mustExist: boolean, timeoutMs: number): Planned[] {
  if (!isDirectory(dir)) {
    if (!mustExist) return [];
    throw new StagedrootError('USAGE', `The ${kind} health check directory ${dir} does not exist`, { option: `${kind}-dir`, value: dir });
  }
  const out: Planned[] = [];
  for (const name of listDir(dir)) {
    const file = path.join(dir, name);
    const st = statPath(file);
    if (!st || !st.isFile() || (st.mode & 0o111) === 0) continue;
    out.push({ kind, name: path.join(path.basename(dir), name), cmd: { file, args: [], display: file }, timeoutMs });
  }
  return out;
}

function plan(o: HealthOptions): Planned[] {
  const timeout = checkTimeoutMs(o.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS, 'timeoutMs');
  const cmds = (kind: HealthKind, list: readonly (HealthCheck | string)[] = []): Planned[] =>
    list.map((c, i) => {
      const check = typeof c === 'string' ? { command: c } : c;
      const cmd = parseCommand(check.command, typeof c === 'string' ? `${kind}[${i}]` : `${kind}[${i}].command`);
      return { kind, name: check.name ?? cmd.display, cmd, timeoutMs: checkTimeoutMs(check.timeoutMs ?? timeout, `${kind}[${i}].timeoutMs`) };
    });
  return [
    ...cmds('required', o.required),
    ...(o.requiredDirs ?? []).flatMap((d) => dirChecks(d, 'required', true, timeout)),
    ...(o.optionalDirs?.required ?? []).flatMap((d) => dirChecks(d, 'required', false, timeout)),
    ...cmds('wanted', o.wanted),
    ...(o.wantedDirs ?? []).flatMap((d) => dirChecks(d, 'wanted', true, timeout)),
    ...(o.optionalDirs?.wanted ?? []).flatMap((d) => dirChecks(d, 'wanted', false, timeout)),
  ];
}

/** Runs every check (all of them: the report lists every failure) and reports; changes nothing. */
export async function runHealthChecks(o: HealthOptions): Promise<HealthReport> {
  const results: CheckResult[] = [];
  for (const p of plan(o)) {
    const r = await runCommand(p.cmd, { timeoutMs: p.timeoutMs, env: o.env, signal: o.signal });
    const res: CheckResult = { name: p.name, kind: p.kind, ok: r.ok, outcome: describeOutcome(r, p.timeoutMs), exitCode: r.exitCode, timedOut: r.timedOut, durationMs: r.durationMs, output: r.output };
    results.push(res);
    o.onResult?.(res);
  }
  const failedRequired = results.filter((r) => r.kind === 'required' && !r.ok);
  return { ok: failedRequired.length === 0, results, failedRequired, failedWanted: results.filter((r) => r.kind === 'wanted' && !r.ok) };
}
