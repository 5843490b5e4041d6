import { spawnSync } from 'node:child_process';
import { StagedrootError } from '../../errors.js';

/**
 * Makes everything written under `p` durable with one syncfs (`sync -f`), far cheaper
 * than an fsync per file (Node has no syncfs binding, and a native addon is not worth
 * one call per stage). Synchronous: it runs as a tree task (see durable.ts
 * syncFilesystem), so the fork of sync(1) happens on a worker thread, not on the
 * importing process's event loop.
 *
 * Only a `sync` that does not know `-f` (coreutils before 8.24, old busybox) falls back
 * to a global sync(2). That is detected from the failure itself, run with LC_ALL=C so
 * the message is not translated: both coreutils and busybox exit 1 and print
 * "invalid option -- 'f'" (or "unrecognized option") to stderr. Any other failure is
 * the filesystem's: syncfs reports a writeback error (EIO, ENOSPC, EDQUOT) and sync(1)
 * prints "error syncing 'P': <strerror>". That is thrown (IO, or NO_SPACE), never
 * swallowed: the caller must not rename a tree into place after it.
 *
 * `env` is the caller's environment (a worker's is a copy from when it started).
 */
export function syncFilesystemNow(p: string, env: Record<string, string | undefined>): void {
  const r = runSync(['-f', p], env);
  if (r.ok) return;
  if (!optionUnsupported(r.stderr)) throw syncError(r, p);
  const global = runSync([], env);
  if (!global.ok) throw syncError(global, p);
}

interface SyncRun {
  ok: boolean;
  stderr: string;
  exitCode?: number;
  signal?: string;
}

function runSync(args: string[], env: Record<string, string | undefined>): SyncRun {
  const r = spawnSync('sync', args, { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'], env: { ...env, LC_ALL: 'C' } });
  if (r.error !== undefined) {
    if ((r.error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new StagedrootError('TOOL_MISSING', 'The `sync` command (coreutils) is needed to make staged trees durable and was not found', { cause: r.error });
    }
    return { ok: false, stderr: r.error.message };
  }
  return { ok: r.status === 0, stderr: String(r.stderr ?? '').trim(), ...(r.status === null ? {} : { exitCode: r.status }), ...(r.signal === null ? {} : { signal: r.signal }) };
}

/** The usage error of a sync(1) that does not know `-f` (coreutils and busybox, LC_ALL=C). */
export function optionUnsupported(stderr: string): boolean {
  return /(invalid|unrecognized|unknown) option/i.test(stderr);
}

function syncError(r: SyncRun, p: string): StagedrootError {
  const how = r.stderr || (r.signal ? `killed by ${r.signal}` : `exit code ${r.exitCode ?? 'unknown'}`);
  const errno = /No space left on device/i.test(r.stderr) ? 'ENOSPC' : /Disk quota exceeded/i.test(r.stderr) ? 'EDQUOT' : /Input\/output error/i.test(r.stderr) ? 'EIO' : undefined;
  const code = errno === 'ENOSPC' || errno === 'EDQUOT' ? 'NO_SPACE' : 'IO';
  return new StagedrootError(code, `Cannot make ${p} durable: sync failed (${how})`, { path: p, ...(errno === undefined ? {} : { errno }) });
}
