import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import type { FaultHook } from '../fs/core/faults.js';
import { EXIT } from '../exit-codes.js';
import type { CliEnv } from './common.js';
import { reportError, type Io } from './io.js';
import { initCommand } from './commands/init.js';
import { statusCommand } from './commands/status.js';
import { stageCommand } from './commands/stage.js';
import { finalizeCommand } from './commands/finalize.js';
import { bootCommand } from './commands/boot.js';
import { markCommands } from './commands/mark.js';
import { rollbackCommand } from './commands/rollback.js';
import { discardCommand } from './commands/discard.js';
import { pruneCommand } from './commands/prune.js';
import { diffCommand } from './commands/diff.js';
import { verifyCommand } from './commands/verify.js';
import { pinCommands } from './commands/pin.js';
import { unlockCommand } from './commands/unlock.js';
import { healthCommand } from './commands/health.js';
import { installCommand } from './commands/install.js';
import { trustCommands } from './commands/trust.js';
import { adoptCommand } from './commands/adopt.js';
import { rebootCommand } from './commands/reboot.js';

// The version is package.json's (one place): ../../package.json from src/cli and from dist/cli alike.
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

export function buildProgram(env: CliEnv): Command {
  const program = new Command('stagedroot')
    .description('Transactional root filesystem updates: stage, validate, swap at reboot, assess, roll back.')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) })
    .exitOverride();
  for (const register of [initCommand, statusCommand, stageCommand, finalizeCommand, bootCommand, markCommands, rollbackCommand, discardCommand, pruneCommand, diffCommand, verifyCommand, pinCommands, unlockCommand, healthCommand, trustCommands, adoptCommand, installCommand, rebootCommand]) {
    register(program, env);
  }
  for (const c of program.commands) c.exitOverride().configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) });
  return program;
}

/** Runs the CLI and returns its exit code (never calls process.exit: tests run it in-process). */
export async function runCli(argv: string[], baseIo: Io, faults?: FaultHook): Promise<number> {
  // --debug is global (any position before `--`): unexpected errors then show their stack.
  const end = argv.indexOf('--');
  const debug = argv.findIndex((a, i) => a === '--debug' && (end === -1 || i < end));
  const io: Io = debug === -1 ? baseIo : { ...baseIo, debug: true };
  if (debug !== -1) argv = argv.filter((_, i) => i !== debug);
  const env: CliEnv = { io, faults, exitCode: 0 };
  const program = buildProgram(env);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.OK;
      return EXIT.USAGE;
    }
    return reportError(io, err, false);
  }
  return env.exitCode;
}
