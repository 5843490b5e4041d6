import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { tempNameIn } from './temp-names.js';

/**
 * Files of stagedroot's own package (a bundle and the code cache beside it: src/cli/code-cache.ts),
 * never files inside a root: those go through RootFs (fs/trees). Host paths.
 */

/** A file's bytes (throws the errno error when it cannot be read). */
export function readPackageFile(file: string): Buffer;
export function readPackageFile(file: string, encoding: 'utf8'): string;
export function readPackageFile(file: string, encoding?: 'utf8'): Buffer | string {
  return encoding === undefined ? readFileSync(file) : readFileSync(file, encoding);
}

/**
 * Replaces `file` with `bytes` (mode 0644) through a temp beside it and a rename, so that
 * no reader sees it torn; best effort: false when it could not be written (a read-only
 * /usr, another user's package), the temp then removed. Bytes made by `make` only once
 * the temp name is chosen, so that a failure to make them (V8's) is one as well.
 */
export function replacePackageFileBestEffort(file: string, make: () => Uint8Array): boolean {
  const tmp = tempNameIn(dirname(file));
  try {
    writeFileSync(tmp, make(), { mode: 0o644 });
    renameSync(tmp, file);
    return true;
  } catch {
    try {
      rmSync(tmp, { force: true });
    } catch {
      // nothing left to do
    }
    return false;
  }
}
