import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../src/cli/program.js';
import type { Io } from '../../src/cli/io.js';
import type { SysrootPlaces } from '../../src/boot/find-sysroot.js';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.cjs', import.meta.url));
/** The same program for crash tests: SIGKILLed after the n-th mutation with STAGEDROOT_FAULT_KILL_AFTER=n (the real CLI ignores it). */
export const CRASH_CLI = fileURLToPath(new URL('../../dist/testing/crash-cli.js', import.meta.url));

export interface CliResult {
  code: number;
  out: string;
  err: string;
}

/** Places that hold nothing: a test's CLI never finds the host's own /run/stagedroot or /etc/stagedroot. */
export const NO_PLACES: SysrootPlaces = { runDir: '/nonexistent/stagedroot-test/run', etcDir: '/nonexistent/stagedroot-test/etc' };

/** Runs the CLI in this process (fast), capturing its output. */
export async function cli(args: string[], env: NodeJS.ProcessEnv = {}, places: SysrootPlaces = NO_PLACES): Promise<CliResult> {
  let out = '';
  let err = '';
  const io: Io = { out: (t) => void (out += t), err: (t) => void (err += t), errIsTty: false, env, places };
  const code = await runCli(args, io);
  return { code, out, err };
}

/** Runs the built CLI as a real process (`npm test` builds dist/ first). */
export function cliProcess(args: string[], env: NodeJS.ProcessEnv = {}): CliResult {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}
