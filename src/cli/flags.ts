import { fileURLToPath } from 'node:url';
import { readPackageFile } from '../fs/core/package-files.js';

/**
 * The version: package.json's (one place), ../../package.json from src/cli, dist/cli and
 * the bundles alike; read when asked (the bin's start reads no more than it needs). Read
 * and parsed as a file, not required: every verb's program asks for it (its help line),
 * and require's resolution of the path was ~35 ms of apply-live's start in the guest's
 * profile (TCG), where the read is a few.
 */
export function version(): string {
  return (JSON.parse(readPackageFile(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { version: string }).version;
}

/** STAGEDROOT_DEBUG set (not "" or "0"): stacks of unexpected errors are wanted, as with --debug. */
export function debugInEnv(env: NodeJS.ProcessEnv): boolean {
  const v = env.STAGEDROOT_DEBUG;
  return v !== undefined && v !== '' && v !== '0';
}

export interface GlobalFlags {
  /** The arguments without --debug. */
  argv: string[];
  /** --debug on the command line (before `--`: any position), or STAGEDROOT_DEBUG in `env`. */
  debug: boolean;
  /** `--version` (or `-V`) alone: print version(), load no verb. */
  version: boolean;
}

/**
 * The global options, read in this one place before any verb loads: by the bin
 * (main.ts: source maps for --debug, --version without loading the CLI) and by the
 * program (program.ts), whose commander parse then never sees --debug.
 */
export function globalFlags(argv: readonly string[], env: NodeJS.ProcessEnv = {}): GlobalFlags {
  const end = argv.indexOf('--');
  const at = argv.findIndex((a, i) => a === '--debug' && (end === -1 || i < end));
  const rest = at === -1 ? [...argv] : argv.filter((_, i) => i !== at);
  return { argv: rest, debug: at !== -1 || debugInEnv(env), version: rest.length === 1 && (rest[0] === '--version' || rest[0] === '-V') };
}
