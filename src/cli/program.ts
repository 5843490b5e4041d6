import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import type { FaultHook } from '../fs/core/faults.js';
import { EXIT } from '../exit-codes.js';
import type { CliEnv } from './common.js';
import { reportError, type Io } from './io.js';

// The version is package.json's (one place): ../../package.json from src/cli and from dist/cli alike.
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

type Register = (program: Command, env: CliEnv) => void;

/**
 * Each verb's module, loaded only when that verb runs: `stagedroot boot` at every boot
 * must not load (parse, compile, evaluate) the sources, tar, yaml and execa that `stage`
 * needs. The list's order is the help's order; a module that defines several verbs
 * (mark-good and mark-bad) is named by each of them.
 */
const VERBS: readonly (readonly [verbs: readonly string[], load: () => Promise<Register>])[] = [
  [['init'], async () => (await import('./commands/init.js')).initCommand],
  [['status'], async () => (await import('./commands/status.js')).statusCommand],
  [['stage'], async () => (await import('./commands/stage.js')).stageCommand],
  [['finalize'], async () => (await import('./commands/finalize.js')).finalizeCommand],
  [['boot'], async () => (await import('./commands/boot.js')).bootCommand],
  [['mark-good', 'mark-bad'], async () => (await import('./commands/mark.js')).markCommands],
  [['rollback'], async () => (await import('./commands/rollback.js')).rollbackCommand],
  [['discard'], async () => (await import('./commands/discard.js')).discardCommand],
  [['prune'], async () => (await import('./commands/prune.js')).pruneCommand],
  [['diff'], async () => (await import('./commands/diff.js')).diffCommand],
  [['verify'], async () => (await import('./commands/verify.js')).verifyCommand],
  [['pin', 'unpin'], async () => (await import('./commands/pin.js')).pinCommands],
  [['unlock'], async () => (await import('./commands/unlock.js')).unlockCommand],
  [['health'], async () => (await import('./commands/health.js')).healthCommand],
  [['trust'], async () => (await import('./commands/trust.js')).trustCommands],
  [['adopt'], async () => (await import('./commands/adopt.js')).adoptCommand],
  [['install'], async () => (await import('./commands/install.js')).installCommand],
  [['reboot', 'fleetlock'], async () => (await import('./commands/reboot.js')).rebootCommand],
];

/** The verbs the command line names (its first word that is not an option); every verb when it names none we know (help, a typo). */
function verbsFor(argv: readonly string[]): typeof VERBS {
  const word = argv.find((a) => !a.startsWith('-'));
  const one = VERBS.filter(([names]) => word !== undefined && names.includes(word));
  return one.length > 0 ? one : VERBS;
}

/** The program with the verbs `argv` needs registered (all of them without `argv`). */
export async function buildProgram(env: CliEnv, argv?: readonly string[]): Promise<Command> {
  const program = new Command('stagedroot')
    .description('Transactional root filesystem updates: stage, validate, swap at reboot, assess, roll back.')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) })
    .exitOverride();
  // `--version` alone needs no verb at all.
  const wanted = argv !== undefined && argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V') ? [] : verbsFor(argv ?? []);
  const registers = await Promise.all(wanted.map(([, load]) => load()));
  for (const register of registers) register(program, env);
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
  try {
    const program = await buildProgram(env, argv);
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
