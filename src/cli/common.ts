import { Command, Option } from 'commander';
import { StagedrootError } from '../errors.js';
import { findSysroot } from '../boot/find-sysroot.js';
import { checkWaitSeconds } from '../util/options.js';
import type { FaultHook } from '../fs/core/faults.js';
import { Sysroot } from '../sysroot.js';
import { reportError, type Io } from './io.js';

export interface CliEnv {
  io: Io;
  faults?: FaultHook;
  /** Set by a command: the process exit code. */
  exitCode: number;
}

/** What a verb's module exports (src/cli/verbs.ts names it): registers its commands on the program. */
export type Register = (program: Command, env: CliEnv) => void;

export interface CommonOptions {
  sysroot?: string;
  wait?: string;
  json?: boolean;
  dropUnsupportedXattrs?: boolean;
}

/** Adds the options every verb takes. */
export function common(cmd: Command, o: { json?: boolean } = {}): Command {
  cmd.option('--sysroot <dir>', 'the sysroot directory (default: $STAGEDROOT_SYSROOT, else the one the booted system records in /run/stagedroot/booted, else STAGEDROOT_SYSROOT= in /etc/stagedroot/environment)');
  cmd.option('--wait <seconds>', 'wait this long for another writer instead of failing with exit 4');
  if (o.json !== false) cmd.option('--json', 'print machine-readable JSON');
  return cmd;
}

/** For the verbs that build trees (init, stage, finalize): what to do with an attribute the filesystem refuses. */
export function xattrOption(cmd: Command): Command {
  return cmd.option('--drop-unsupported-xattrs', 'drop (with a warning) extended attributes the sysroot filesystem refuses, instead of failing');
}

/** The sysroot: --sysroot, $STAGEDROOT_SYSROOT, /run/stagedroot/booted's sysroot=, /etc/stagedroot/environment (in that order). */
export function sysrootDir(env: CliEnv, o: CommonOptions): string {
  return findSysroot({ option: o.sysroot, env: env.io.env, places: env.io.places }).path;
}

/** --wait, checked as the library checks waitSeconds (one check, util/options.ts). */
export function waitSeconds(o: CommonOptions): number {
  return o.wait === undefined ? 0 : checkWaitSeconds(Number(o.wait), '--wait', o.wait);
}

export function nonNegativeInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new StagedrootError('USAGE', `Expected --${name} to be a non-negative integer, got ${JSON.stringify(v)}`, { option: name, value: v });
  return Number(v);
}

/**
 * Opens the sysroot the options name, for the one verb this process runs. Recovery is
 * left to the verb's write, which runs it under the lock before anything else (its notes
 * go to stderr as warnings); a verb that only reads sees the state as recovery would
 * settle it (an interrupted swap resolved by the pointer) and changes nothing.
 */
export async function openSysroot(env: CliEnv, o: CommonOptions): Promise<Sysroot> {
  return Sysroot.open(sysrootDir(env, o), {
    recoverOnOpen: false,
    waitSeconds: waitSeconds(o),
    faults: env.faults,
    onWarning: (m) => env.io.err(`stagedroot: warning: ${m}\n`),
    xattrPolicy: o.dropUnsupportedXattrs ? 'drop' : 'strict',
  });
}

/** Wraps a verb's action: errors become messages and exit codes. */
export function action<A extends unknown[]>(env: CliEnv, fn: (...args: A) => Promise<number | void>) {
  return async (...args: A): Promise<void> => {
    const opts = args.find((a) => a instanceof Command) as Command | undefined;
    const json = Boolean(opts?.opts().json);
    try {
      env.exitCode = (await fn(...args)) ?? 0;
    } catch (err) {
      env.exitCode = reportError(env.io, err, json);
    }
  };
}

export { Option };

/** commander's collector for a repeatable option: each use appends its value. */
export const collect = (v: string, all: string[]): string[] => [...all, v];
