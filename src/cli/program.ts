import { Command, CommanderError } from 'commander';
import type { FaultHook } from '../fs/core/faults.js';
import { EXIT } from '../exit-codes.js';
import { verbWord } from './boot-path.js';
import type { CliEnv } from './common.js';
import { globalFlags, version } from './flags.js';
import { processIo, reportError, type Io } from './io.js';
import { HELD, loadVerb } from './verb-modules.js';
import type { VerbEntry } from './verbs.js';

/**
 * The verbs the command line names; every verb held when it names none we know (help, a
 * typo). A verb's module is loaded only when that verb runs: `stagedroot boot` at every
 * boot must not load (parse, compile, evaluate) the sources, tar, yaml and execa that
 * `stage` needs.
 */
function verbsFor(argv: readonly string[]): readonly VerbEntry[] {
  const word = verbWord(argv);
  const one = HELD.filter(({ names }) => word !== undefined && names.includes(word));
  return one.length > 0 ? one : HELD;
}

/**
 * The program (of every verb of src/cli/verbs.ts; in the boot bundle, of the boot path's),
 * with the verbs `argv` needs registered (all of them without `argv`).
 */
export async function buildProgram(env: CliEnv, argv?: readonly string[]): Promise<Command> {
  const program = new Command('stagedroot')
    .description('Transactional root filesystem updates: stage, validate, swap at reboot, assess, roll back.')
    // For the help's line: `--version` alone never reaches the parse (runCli answers it, and the bin before it).
    .version(version())
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) })
    .exitOverride();
  const registers = await Promise.all(verbsFor(argv ?? []).map(loadVerb));
  for (const register of registers) register(program, env);
  for (const c of program.commands) c.exitOverride().configureOutput({ writeOut: (s) => env.io.out(s), writeErr: (s) => env.io.err(s) });
  return program;
}

/** Runs the CLI and returns its exit code (never calls process.exit: tests run it in-process). */
export async function runCli(argv: string[], baseIo: Io, faults?: FaultHook): Promise<number> {
  const flags = globalFlags(argv);
  // --debug (the one global option besides --version): unexpected errors then show their stack.
  const io: Io = flags.debug ? { ...baseIo, debug: true } : baseIo;
  if (flags.version) {
    io.out(`${version()}\n`);
    return EXIT.OK;
  }
  const env: CliEnv = { io, faults, exitCode: 0 };
  try {
    const program = await buildProgram(env, flags.argv);
    await program.parseAsync(flags.argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.OK;
      return EXIT.USAGE;
    }
    return reportError(io, err, false);
  }
  return env.exitCode;
}

/**
 * A bundle's entry (run.ts, for dist/cli/run.cjs and boot.cjs): the bin calls it with its
 * arguments once it has loaded the bundle; it runs the CLI and sets the process's exit code.
 */
export function main(argv: string[], io: Io = processIo): Promise<void> {
  return runCli(argv, io).then((code) => {
    process.exitCode = code;
  });
}
