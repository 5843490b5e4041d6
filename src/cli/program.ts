import type { Command } from 'commander';
import type { FaultHook } from '../fs/core/faults.js';
import { bootVerb, healthVerb, markVerbs, statusVerb } from './boot-verbs.js';
import type { CliEnv } from './common.js';
import type { Io } from './io.js';
import { buildProgramOf, runCliOf, type Verb } from './make-program.js';

/** Every verb, in the help's order (the boot path's are shared with the boot bundle: boot-verbs.ts). */
export const VERBS: readonly Verb[] = [
  [['init'], async () => (await import('./commands/init.js')).initCommand],
  statusVerb,
  [['stage'], async () => (await import('./commands/stage.js')).stageCommand],
  [['finalize'], async () => (await import('./commands/finalize.js')).finalizeCommand],
  bootVerb,
  markVerbs,
  [['rollback'], async () => (await import('./commands/rollback.js')).rollbackCommand],
  [['discard'], async () => (await import('./commands/discard.js')).discardCommand],
  [['prune'], async () => (await import('./commands/prune.js')).pruneCommand],
  [['diff'], async () => (await import('./commands/diff.js')).diffCommand],
  [['verify'], async () => (await import('./commands/verify.js')).verifyCommand],
  [['pin', 'unpin'], async () => (await import('./commands/pin.js')).pinCommands],
  [['unlock'], async () => (await import('./commands/unlock.js')).unlockCommand],
  healthVerb,
  [['trust'], async () => (await import('./commands/trust.js')).trustCommands],
  [['adopt'], async () => (await import('./commands/adopt.js')).adoptCommand],
  [['install'], async () => (await import('./commands/install.js')).installCommand],
  [['reboot', 'fleetlock'], async () => (await import('./commands/reboot.js')).rebootCommand],
];

/** The full CLI's program with the verbs `argv` needs registered (all of them without `argv`). */
export function buildProgram(env: CliEnv, argv?: readonly string[]): Promise<Command> {
  return buildProgramOf(VERBS, env, argv);
}

/** Runs the full CLI and returns its exit code (never calls process.exit: tests run it in-process). */
export function runCli(argv: string[], baseIo: Io, faults?: FaultHook): Promise<number> {
  return runCliOf(VERBS, argv, baseIo, faults);
}
