import * as path from 'node:path';
import { StagedrootError, type Issue } from '../errors.js';
import { boundText } from '../util/bounded-output.js';
import { checkTimeoutMs, optionError } from '../util/options.js';
import { describeOutcome, parseCommand, runCommand } from '../util/run-command.js';
import type { ValidationContext } from './types.js';

export const DEFAULT_VALIDATOR_TIMEOUT_MS = 60_000;

/**
 * An executable that judges the staged tree: exit 0 accepts it, anything else (or a
 * timeout) rejects it. It gets the tree in STAGEDROOT_TREE (plus STAGEDROOT_ID,
 * STAGEDROOT_LABEL, STAGEDROOT_MANIFEST and STAGEDROOT_DELTA, the update's delta.json
 * naming the paths it changed) and must not write into it. Its output is kept, bounded, in the
 * failure record.
 */
export interface CommandValidator {
  /** "path/to/check --flag" (split like a shell would, but no shell runs) or [file, ...args]. */
  command: string | readonly string[];
  name?: string;
  /** Default 60 s; the command and its children are killed when it runs out. */
  timeoutMs?: number;
}

export interface CommandValidationResult {
  issues: Issue[];
  /** The output of the commands that failed, bounded. */
  output?: string;
}

/** A command validator whose options were checked (planCommandValidators). */
export interface PlannedValidator {
  name: string;
  cmd: ReturnType<typeof parseCommand>;
  timeoutMs: number;
}

/**
 * Checks the configured validators once, where they enter (stage), before anything is
 * built or recorded: USAGE names the option (`commands[1].timeoutMs`), the value and its type.
 */
export function planCommandValidators(list: unknown): PlannedValidator[] {
  if (!Array.isArray(list)) throw optionError('commands', 'an array of commands or { command, name?, timeoutMs? } objects', list);
  return list.map((item: unknown, i) => {
    const at = `commands[${i}]`;
    if (typeof item === 'string') return planOne({ command: item }, at, `${at}`);
    if (item === null || typeof item !== 'object' || Array.isArray(item)) throw optionError(at, 'a command or a { command, name?, timeoutMs? } object', item);
    return planOne(item as CommandValidator, at, `${at}.command`);
  });
}

function planOne(v: CommandValidator, at: string, commandOption: string): PlannedValidator {
  const cmd = parseCommand(v.command, commandOption);
  if (v.name !== undefined && typeof v.name !== 'string') throw optionError(`${at}.name`, 'a string', v.name);
  return { name: v.name ?? cmd.display, cmd, timeoutMs: checkTimeoutMs(v.timeoutMs ?? DEFAULT_VALIDATOR_TIMEOUT_MS, `${at}.timeoutMs`) };
}

/** Runs validators planned (checked) by planCommandValidators. */
export async function runCommandValidators(planned: readonly PlannedValidator[], ctx: ValidationContext): Promise<CommandValidationResult> {
  const issues: Issue[] = [];
  const outputs: string[] = [];
  const env = {
    STAGEDROOT_TREE: ctx.tree,
    STAGEDROOT_ID: ctx.id,
    STAGEDROOT_LABEL: ctx.label,
    STAGEDROOT_MANIFEST: ctx.manifest,
    STAGEDROOT_DELTA: path.join(path.dirname(ctx.manifest), 'delta.json'),
  };
  for (const { name, cmd, timeoutMs } of planned) {
    const r = await runCommand(cmd, { timeoutMs, env, signal: ctx.signal });
    if (r.notRunnable) {
      throw new StagedrootError('TOOL_MISSING', `The validator ${name} cannot be run: ${r.notRunnable}`, { value: cmd.file });
    }
    if (r.ok) continue;
    const last = r.output.trim().split('\n').filter(Boolean).pop();
    issues.push({ code: r.timedOut ? 'VALIDATOR_TIMEOUT' : 'VALIDATOR_FAILED', path: '', message: `validator ${name} ${describeOutcome(r, timeoutMs)}${last ? `: ${last}` : ''}`, severity: 'error' });
    outputs.push(`--- validator ${name} (${describeOutcome(r, timeoutMs)}) ---\n${r.output}`);
  }
  return outputs.length ? { issues, output: boundText(outputs.join('\n')) } : { issues };
}
