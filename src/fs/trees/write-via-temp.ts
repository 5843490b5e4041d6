import * as path from 'node:path';
import type { FaultHook } from '../core/faults.js';
import { ioError } from '../core/io-error.js';
import { tempNameIn } from '../core/temp-names.js';

export { isTempName, isLegacyTempName, TEMP_PREFIX, tempNameIn } from '../core/temp-names.js';

/**
 * THE write-via-temp routine: every entry stagedroot replaces atomically (a file of a
 * tree, a state file, a pointer symlink, a boot entry, a kept copy, a kernel directory)
 * is made under a temp name beside its place, `.stagedroot-tmp-PID-HEX` (one scheme,
 * whatever the target's name, so that one pattern finds every leftover), then renamed
 * over it, then its directory is fsynced. A file is fsynced before the rename. Any
 * error (or a fault hook that throws) before the rename removes what was made under
 * the temp name and is thrown: an I/O error is never followed by the rename that
 * commits. What a crash leaves under a temp name is removed by recovery (isTempName).
 */
export interface ViaTempOptions {
  /** The system calls (RootFs's TreeIo: the disk, or a dry run's memory layer; a file needs FileIo's). */
  io: CommitIo;
  faults: FaultHook;
  /** false: no fsync of the file or the directory (a staging tree, synced whole at the end). */
  durable: boolean;
  /** The path errors name (a tree path, or the host path). */
  rel: string;
  /** Whose the files are, for the error's code (see ioError). */
  where?: 'tree' | 'sysroot';
  /** Run after the rename and before the directory's fsync, when durable (the sysroot's own files: syncRenamedOnFat). */
  afterRename?: (dest: string) => void;
}

/**
 * What a commit calls (as TreeIo, tree-io.ts, names them; not imported from there, which
 * would close a circle through copy-entry): the rename, the fsync of the directory, the
 * removal of a temp entry after an error.
 */
export interface CommitIo {
  rename(from: string, to: string): void;
  removeTree(host: string): void;
  fsyncDir(dir: string): void;
}
/** What writing a file calls besides. */
export interface FileIo extends CommitIo {
  /** A new file (O_EXCL, not following a symlink); its descriptor. */
  create(host: string, mode: number): number;
  fsync(fd: number): void;
  close(fd: number): void;
}
type FileOptions = Omit<ViaTempOptions, 'io'> & { io: FileIo; mode: number; finish?: (fd: number, tmp: string) => void };

/**
 * Makes an entry under a temp name beside `dest` (`make` creates it, of any kind: a
 * file, a symlink, a FIFO, a directory with its content) and commits it with one rename
 * over `dest` and an fsync of the directory.
 */
export function commitViaTemp(dest: string, make: (tmp: string) => void, o: ViaTempOptions): void {
  const tmp = tempNameIn(path.dirname(dest));
  try {
    make(tmp);
  } catch (err) {
    throw discard(tmp, err, o);
  }
  commit(tmp, dest, o);
}

/**
 * A regular file: created under a temp name (O_EXCL, not following a symlink, `mode`),
 * written by `fill`, then `finish` (attributes), an fsync, a close, then committed.
 */
export function writeFileViaTemp(dest: string, fill: (fd: number) => void, o: FileOptions): void {
  commitViaTemp(
    dest,
    (tmp) => {
      const fd = o.io.create(tmp, o.mode);
      closeAfter(fd, o, () => {
        o.faults.afterMutation('create', tmp);
        fill(fd);
        finishFile(fd, tmp, o);
      });
    },
    o,
  );
}

/** writeFileViaTemp for content that comes as a stream (never held whole in memory). */
export async function writeStreamViaTemp(dest: string, fill: (fd: number) => Promise<void>, o: FileOptions): Promise<void> {
  const tmp = tempNameIn(path.dirname(dest));
  try {
    const fd = o.io.create(tmp, o.mode);
    let ok = false;
    try {
      o.faults.afterMutation('create', tmp);
      await fill(fd);
      finishFile(fd, tmp, o);
      ok = true;
    } finally {
      closeQuietlyUnless(ok, fd, o);
    }
  } catch (err) {
    throw discard(tmp, err, o);
  }
  commit(tmp, dest, o);
}

function finishFile(fd: number, tmp: string, o: FileOptions): void {
  o.finish?.(fd, tmp);
  if (o.durable) o.io.fsync(fd);
}

/**
 * Runs `body` (the fault hook's report of the new file included: a hook that throws
 * must not leak the descriptor), then closes `fd`; a failed close is an error too
 * (nothing is renamed), unless `body`'s own error is on its way.
 */
function closeAfter(fd: number, o: FileOptions, body: () => void): void {
  let ok = false;
  try {
    body();
    ok = true;
  } finally {
    closeQuietlyUnless(ok, fd, o);
  }
}

function closeQuietlyUnless(ok: boolean, fd: number, o: FileOptions): void {
  try {
    o.io.close(fd);
  } catch (err) {
    if (ok) throw err;
  }
}

function commit(tmp: string, dest: string, o: ViaTempOptions): void {
  try {
    o.io.rename(tmp, dest);
  } catch (err) {
    throw discard(tmp, err, o, dest);
  }
  o.faults.afterMutation('rename', dest);
  if (!o.durable) return;
  o.afterRename?.(dest);
  o.io.fsyncDir(path.dirname(dest));
}

/** Removes whatever was made under the temp name; returns the error to throw. */
function discard(tmp: string, err: unknown, o: ViaTempOptions, host = tmp): unknown {
  try {
    o.io.removeTree(tmp);
  } catch {
    // nothing was made there, or it cannot be removed now: recovery removes it (isTempName)
  }
  return ioError(err, o.rel, host, o.where);
}
