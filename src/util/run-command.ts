import { optionError } from './options.js';
import { BoundedOutput, OUTPUT_LIMIT } from './bounded-output.js';

/** A command to run: an executable and its arguments (never through a shell). */
export interface CommandSpec {
  file: string;
  args: string[];
  /** How it is shown to people. */
  display: string;
}

export interface CommandResult {
  ok: boolean;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** The executable does not exist or cannot be executed (ENOENT, EACCES). */
  notRunnable: string | null;
  /** Combined stdout+stderr, bounded (first and last halves kept). */
  output: string;
  durationMs: number;
}

/**
 * execa's parseCommandString (execa 9, lib/methods/command.js), here so that reading a
 * command line does not load execa (a verb that runs nothing should not pay for it):
 * words split on spaces, a space escaped by a backslash kept in its word.
 */
function parseCommandString(command: string): string[] {
  const trimmed = command.trim();
  if (trimmed === '') return [];
  const tokens: string[] = [];
  for (const token of trimmed.split(/ +/g)) {
    const previous = tokens.at(-1);
    if (previous !== undefined && previous.endsWith('\\')) tokens[tokens.length - 1] = `${previous.slice(0, -1)} ${token}`;
    else tokens.push(token);
  }
  return tokens;
}

/** "cmd arg 'quoted arg'" or ["cmd", "arg"] → a CommandSpec (execa's parser, no shell). */
export function parseCommand(cmd: string | readonly string[], option = 'command'): CommandSpec {
  const expected = 'a command line or an array of strings naming an executable';
  if (typeof cmd !== 'string' && !(Array.isArray(cmd) && cmd.every((a) => typeof a === 'string'))) throw optionError(option, expected, cmd);
  const parts = typeof cmd === 'string' ? parseCommandString(cmd.trim()) : [...cmd];
  if (parts.length === 0 || parts[0] === '') throw optionError(option, expected, cmd);
  const [file, ...args] = parts as [string, ...string[]];
  return { file, args, display: typeof cmd === 'string' ? cmd.trim() : parts.join(' ') };
}

const KILL_GRACE_MS = 2000;

/**
 * Runs a command with a timeout, capturing its combined output (bounded). It runs in a
 * process group of its own so that a timeout kills its children too (a check script
 * whose `sleep` outlived it would otherwise hold the output pipe open). Never rejects:
 * the caller decides what a failure means.
 *
 * Why the timeout and the abort are not execa's `timeout`, `cancelSignal` and
 * `forceKillAfterDelay`: those signal the child's pid only (execa 9 calls the child's
 * `kill()`), so a hook's or a check's own children outlive them, and execa waits for
 * the output pipe they still hold (test/util/run-command.test.ts shows both). execa is
 * kept for what it does well here: spawning without a shell, interleaving stdout and
 * stderr (`all`), ENOENT and EACCES as results, and the zstd pipe (sources/decompress.ts).
 */
export async function runCommand(
  cmd: CommandSpec,
  o: { timeoutMs: number; env?: Record<string, string>; cwd?: string; signal?: AbortSignal; outputLimit?: number; onOutput?: (text: string) => void },
): Promise<CommandResult> {
  const started = Date.now();
  const out = new BoundedOutput(o.outputLimit ?? OUTPUT_LIMIT);
  const { execa } = await import('execa'); // loaded by the first command run, not by every verb
  const sub = execa(cmd.file, cmd.args, {
    all: true,
    buffer: false,
    reject: false,
    stdin: 'ignore',
    detached: true,
    cwd: o.cwd,
    env: o.env,
    extendEnv: true,
  });
  sub.all?.on('data', (c: Buffer) => {
    out.push(c);
    o.onOutput?.(c.toString());
  });
  let timedOut = false;
  const killGroup = (sig: NodeJS.Signals): void => {
    if (sub.pid === undefined) return;
    try {
      process.kill(-sub.pid, sig);
    } catch {
      // already gone
    }
  };
  let hard: ReturnType<typeof setTimeout> | undefined;
  const stop = (): void => {
    killGroup('SIGTERM');
    hard = setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, o.timeoutMs);
  o.signal?.addEventListener('abort', stop, { once: true });
  const r = await sub;
  clearTimeout(timer);
  if (hard) clearTimeout(hard);
  o.signal?.removeEventListener('abort', stop);
  const code = (r as { code?: string }).code;
  const notRunnable = r.exitCode === undefined && (code === 'ENOENT' || code === 'EACCES') ? `${cmd.file}: ${code === 'ENOENT' ? 'not found' : 'not executable'} (${code})` : null;
  return {
    ok: !r.failed && r.exitCode === 0 && !timedOut,
    exitCode: r.exitCode ?? null,
    signal: r.signal ?? null,
    timedOut,
    notRunnable,
    output: out.toString(),
    durationMs: Date.now() - started,
  };
}

/** "exited 1", "timed out after 5s", "killed by SIGKILL", "not found (ENOENT)". */
export function describeOutcome(r: CommandResult, timeoutMs: number): string {
  if (r.notRunnable) return r.notRunnable;
  if (r.timedOut) return `timed out after ${timeoutMs / 1000}s`;
  if (r.signal) return `killed by ${r.signal}`;
  return `exited ${r.exitCode}`;
}
