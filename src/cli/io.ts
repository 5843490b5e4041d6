import { StagedrootError, formatIssues } from '../errors.js';
import { exitCodeFor } from '../exit-codes.js';
import type { SysrootPlaces } from '../boot/find-sysroot.js';
import { debugInEnv } from './flags.js';
import { writeAllSync } from '../fs/core/write-fd.js';

/** Where the CLI prints: injectable so tests can run the program in-process. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  /** True when stderr is a terminal (progress bars are drawn only then). */
  errIsTty: boolean;
  env: NodeJS.ProcessEnv;
  /** Set by --debug: unexpected errors show their stack. */
  debug?: boolean;
  /** Where the machine's records are (/run/stagedroot, /etc/stagedroot): tests point them at temp dirs. */
  places?: SysrootPlaces;
}

/**
 * Writes to fd 1 or 2 directly, synchronously (as Node's stdio streams write files, pipes
 * and terminals on Linux) without making the stream: process.stdout's first write loads
 * Node's stream and socket modules, ~4 ms of CPU, more than `boot` spends on its work. A
 * write that cannot go now (a full non-blocking pipe) or fails goes to the stream, which
 * waits or reports as before, and so does everything after it on that fd, in order.
 */
function stdio(fd: 1 | 2, stream: () => NodeJS.WriteStream): (text: string) => void {
  let streaming = false;
  return (text) => {
    if (streaming) {
      stream().write(text);
      return;
    }
    const bytes = Buffer.from(text);
    const done = writeAllSync(fd, bytes);
    if (done < bytes.length) {
      streaming = true;
      stream().write(bytes.subarray(done));
    }
  };
}

export const processIo: Io = {
  out: stdio(1, () => process.stdout),
  err: stdio(2, () => process.stderr),
  // A getter: process.stderr is made (its stream modules loaded) only when a verb asks or writes.
  get errIsTty() {
    return Boolean(process.stderr.isTTY);
  },
  env: process.env,
};

/** Stacks of unexpected errors are printed with --debug on the command line or STAGEDROOT_DEBUG set (not "0"). */
export function debugWanted(io: Io): boolean {
  return debugInEnv(io.env) || io.debug === true;
}

export function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, null, 2) + '\n');
}

/** Prints an error for people (stderr) and, with --json, as an object (stdout); returns the exit code. */
export function reportError(io: Io, err: unknown, json: boolean): number {
  const code = exitCodeFor(err);
  if (err instanceof StagedrootError) {
    io.err(`stagedroot: ${err.code}: ${err.message}\n`);
    if (err.issues.length > 0 && !err.message.includes(err.issues[0]!.message)) io.err(formatIssues(err.issues) + '\n');
    if (err.code === 'BUSY') io.err('(exit 4: another writer holds the sysroot lock)\n');
    else if (code === 3) io.err('(exit 3: the update was rejected; the booted deployment is untouched)\n');
    if (json) printJson(io, { ok: false, exitCode: code, error: err.toJSON() });
  } else {
    // An unexpected error is still one line, `stagedroot: CODE: message`; the stack only
    // when asked for (--debug or STAGEDROOT_DEBUG=1).
    const errno = (err as NodeJS.ErrnoException)?.code;
    io.err(`stagedroot: ${typeof errno === 'string' && /^E[A-Z0-9]+$/.test(errno) ? 'IO' : 'INTERNAL'}: ${(err as Error)?.message ?? String(err)}\n`);
    if (debugWanted(io)) io.err(`${(err as Error)?.stack ?? String(err)}\n`);
    if (json) printJson(io, { ok: false, exitCode: code, error: { code: 'INTERNAL', message: String((err as Error)?.message ?? err) } });
  }
  return code;
}
