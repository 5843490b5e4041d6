import { StagedrootError, errnoOf } from '../../errors.js';

/**
 * Wraps a Node filesystem error, naming the path. Inside a tree an update is applied to,
 * a path conflict (ENOTDIR, EEXIST, EISDIR, ELOOP, ENOENT, EMLINK) is the update's fault:
 * APPLY_FAILED, a rejection (exit 3). Anything else, and every error on the sysroot's own
 * files (`where: 'sysroot'`), is the machine's: IO (exit 1), or NO_SPACE.
 */
export function ioError(err: unknown, p: string, host: string, where: 'tree' | 'sysroot' = 'tree'): StagedrootError {
  if (err instanceof StagedrootError) return err;
  const errno = errnoOf(err);
  const msg = (err as Error)?.message ?? String(err);
  if (errno === 'ENOSPC' || errno === 'EDQUOT') {
    return new StagedrootError('NO_SPACE', `No space left writing ${p} (${errno})`, { path: p, resolvedPath: host, errno, cause: err });
  }
  const conflict = errno === 'ENOTDIR' || errno === 'EEXIST' || errno === 'EISDIR' || errno === 'ELOOP' || errno === 'ENOENT' || errno === 'EMLINK';
  const code = where === 'tree' && conflict ? 'APPLY_FAILED' : 'IO';
  return new StagedrootError(code, `Cannot write ${p}: ${msg}`, { path: p, resolvedPath: host, errno, cause: err });
}
