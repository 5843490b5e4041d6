import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import type { FaultHook } from '../fs/core/faults.js';
import { EXIT } from '../exit-codes.js';
import { verbWord } from './boot-path.js';
import type { CliEnv } from './common.js';
import { processIo, reportError, type Io } from './io.js';

// The version is package.json's (one place): ../../package.json from src/cli and from dist/cli alike.
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

type Register = (program: Command, env: CliEnv) => void;

/**
 * A verb's module, loaded only when that verb runs: `stagedroot boot` at every boot must
 * not load (parse, compile, evaluate) the sources, tar, yaml and execa that `stage`
 * needs. A module that defines several verbs (mark-good and mark-bad) is named by each.
 */
export type Verb = readonly [verbs: readonly string[], load: () => Promise<Register>];

/** The verbs the command line names; every verb of the list when it names none we know (help, a typo). */
function verbsFor(verbs: readonly Verb[], argv: readonly string[]): readonly Verb[] {
  const word = verbWord(argv);
  const one = verbs.filter(([names]) => word !== undefined && names.includes(word));
  return one.length > 0 ? one : verbs;
}

/**
 * The program of a list of verbs (the full CLI's, program.ts; the boot bundle's,
 * boot-verbs.ts), with the verbs `argv` needs registered (all of them without `argv`).
 */
export async function buildProgramOf(verbs: readonly Verb[], env: CliEnv, argv?: readonly string[]): Promise<Command> {
  const program = new Command('stagedroot')
    .description('Transactional root filesystem updates: stage, validate, swap at reboot, assess, roll back.')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) })
    .exitOverride();
  // `--version` alone needs no verb at all.
  const wanted = argv !== undefined && argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V') ? [] : verbsFor(verbs, argv ?? []);
  const registers = await Promise.all(wanted.map(([, load]) => load()));
  for (const register of registers) register(program, env);
  for (const c of program.commands) c.exitOverride().configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) });
  return program;
}

/** Runs a CLI of these verbs and returns its exit code (never calls process.exit: tests run it in-process). */
export async function runCliOf(verbs: readonly Verb[], argv: string[], baseIo: Io, faults?: FaultHook): Promise<number> {
  // --debug is global (any position before `--`): unexpected errors then show their stack.
  const end = argv.indexOf('--');
  const debug = argv.findIndex((a, i) => a === '--debug' && (end === -1 || i < end));
  const io: Io = debug === -1 ? baseIo : { ...baseIo, debug: true };
  if (debug !== -1) argv = argv.filter((_, i) => i !== debug);
  const env: CliEnv = { io, faults, exitCode: 0 };
  try {
    const program = await buildProgramOf(verbs, env, argv);
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

/** A bundle's entry (run.ts, boot-run.ts): runs the CLI of these verbs and sets the process's exit code. */
export function bundleMain(verbs: readonly Verb[]): (argv: string[], io?: Io) => Promise<void> {
  return (argv, io = processIo) =>
    runCliOf(verbs, argv, io).then((code) => {
      process.exitCode = code;
    });
}
