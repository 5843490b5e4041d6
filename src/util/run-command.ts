import { spawn } from 'node:child_process';
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
 * Spawned with node:child_process directly, not execa: what execa did here (no shell,
 * stdout and stderr interleaved as they arrive, ENOENT and EACCES as results) is a few
 * lines, and its import cost the first command of a verb ~250 ms (apply-live's first
 * systemctl action, BENCHMARKS.md). Nor would its `timeout`, `cancelSignal` and
 * `forceKillAfterDelay` do: those signal the child's pid only, so a hook's or a check's
 * own children outlive them, and the output pipe they still hold is waited for
 * (test/util/run-command.test.ts shows both). The result is the one of 'close': the
 * process has exited and its output pipes are closed.
 *
 * `output`: the command's stdout and stderr both go to that descriptor (onOutput is not called)
 * (a file: fs/output/capture-file.ts) instead of two pipes, whose sockets are most of a
 * first spawn's cost under TCG, and the result's output is what `read` returns (bounded as the pipes' is) once the
 * command has exited (it closes the descriptor); for a command that leaves no child
 * writing after it (systemctl: apply-live's actions), whose output after its exit would
 * not be waited for.
 */
export async function runCommand(
  cmd: CommandSpec,
  o: { timeoutMs: number; env?: Record<string, string>; cwd?: string; signal?: AbortSignal; outputLimit?: number; onOutput?: (text: string) => void; output?: { fd: number; read: (limit: number) => string } },
): Promise<CommandResult> {
  const started = Date.now();
  const limit = o.outputLimit ?? OUTPUT_LIMIT;
  const out = new BoundedOutput(limit);
  const sink = o.output ?? null;
  let sub: ReturnType<typeof spawn>;
  try {
    sub = spawn(cmd.file, cmd.args, { stdio: sink === null ? ['ignore', 'pipe', 'pipe'] : ['ignore', sink.fd, sink.fd], detached: true, cwd: o.cwd, env: o.env === undefined ? process.env : { ...process.env, ...o.env } });
  } catch (e) {
    sink?.read(limit); // closes it
    // A synchronous refusal (an argument with a NUL byte, say): a result like any failure to start.
    return { ok: false, exitCode: null, signal: null, timedOut: false, notRunnable: null, output: (e as Error).message, durationMs: Date.now() - started };
  }
  const onData = (c: Buffer): void => {
    out.push(c);
    o.onOutput?.(c.toString());
  };
  sub.stdout?.on('data', onData);
  sub.stderr?.on('data', onData);
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
  const r = await new Promise<{ exitCode: number | null; signal: string | null; error: NodeJS.ErrnoException | null }>((resolve) => {
    let error: NodeJS.ErrnoException | null = null;
    // A failure to start ('error' with no pid) may come without a 'close'; any other 'error' precedes one.
    sub.once('error', (e: NodeJS.ErrnoException) => {
      error = e;
      if (sub.pid === undefined) resolve({ exitCode: null, signal: null, error });
    });
    sub.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ exitCode: code, signal, error }));
  });
  clearTimeout(timer);
  if (hard) clearTimeout(hard);
  o.signal?.removeEventListener('abort', stop);
  const code = r.error?.code;
  const notRunnable = r.exitCode === null && r.signal === null && (code === 'ENOENT' || code === 'EACCES') ? `${cmd.file}: ${code === 'ENOENT' ? 'not found' : 'not executable'} (${code})` : null;
  return {
    ok: r.error === null && r.exitCode === 0 && !timedOut,
    exitCode: r.exitCode,
    signal: r.signal,
    timedOut,
    notRunnable,
    output: sink === null ? out.toString() : sink.read(limit),
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
