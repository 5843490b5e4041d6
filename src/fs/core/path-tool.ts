import { spawnSync } from 'node:child_process';
import { StagedrootError } from '../../errors.js';

/**
 * Runs a tool on one path whose bytes are kept exactly: a Buffer path (a name that is
 * not UTF-8) cannot be an argv string without being converted, so its bytes travel as a
 * printf(1) format (octal escapes) and a POSIX shell rebuilds them. No other input
 * reaches the shell: the tool and its options are positional parameters.
 */
export function runOnPath(host: string | Buffer, argv: string[], rel: string): string {
  const bytes = typeof host === 'string' ? Buffer.from(host, 'utf8') : host;
  // The trailing "x" keeps a name's final newline through the command substitution.
  const script = 'p=$(printf "$1"; printf x); p=${p%x}; shift; "$@" "$p"';
  const r = spawnSync('sh', ['-c', script, 'sh', printfFormat(bytes), ...argv], { encoding: 'latin1' });
  if (r.error) throw new StagedrootError('TOOL_MISSING', `Cannot run ${argv[0]} for ${rel}: ${r.error.message}`, { path: rel, cause: r.error });
  if (r.status !== 0) {
    const msg = r.stderr.trim();
    const code = /Operation not supported/.test(msg) ? 'EOPNOTSUPP' : /Operation not permitted/.test(msg) ? 'EPERM' : /No such attribute/.test(msg) ? 'ENODATA' : /No space/.test(msg) ? 'ENOSPC' : /File exists/.test(msg) ? 'EEXIST' : undefined;
    throw Object.assign(new Error(`${argv[0]}: ${msg}`), { code });
  }
  return r.stdout;
}

/** A path as a printf(1) format: every byte outside printable ASCII (and % and \) as an octal escape. */
function printfFormat(b: Buffer): string {
  let s = '';
  for (const c of b) s += c >= 0x20 && c < 0x7f && c !== 0x25 && c !== 0x5c ? String.fromCharCode(c) : '\\' + c.toString(8).padStart(3, '0');
  return s;
}

/**
 * Creates a FIFO (Node has no mkfifo): coreutils' mkfifo with the mode given, then the
 * caller sets owner and times as for any entry.
 */
export function makeFifo(host: string | Buffer, mode: number, rel: string): void {
  runOnPath(host, ['mkfifo', '-m', (mode & 0o7777).toString(8), '--'], rel);
}
