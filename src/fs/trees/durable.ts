import * as fs from 'node:fs';
import * as path from 'node:path';
import type { z } from 'zod';
import { StagedrootError, errnoOf } from '../../errors.js';
import { parseJsonState } from '../../util/json-state.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { syncRenamedOnFat } from '../core/fat-entry.js';
import { fsyncDir } from '../core/fsync-dir.js';
import { ioError } from '../core/io-error.js';
import { removeTreeNow } from './remove-tree.js';
import { hostIo } from './tree-io.js';
import { commitViaTemp, isLegacyTempName, isTempName, writeFileViaTemp, type ViaTempOptions } from './write-via-temp.js';
import { listDir, readText } from '../core/host-paths.js';
import { runTreeTask } from '../jobs/tree-jobs.js';
import { treeTasks } from './tasks.js';

export { optionUnsupported } from '../core/sync-fs.js';

/**
 * Durable operations on the sysroot's own files (state, pointers, deployment dirs).
 * Each is crash-atomic: temp + fsync + rename + fsync of the directory (on FAT, an ESP,
 * an fsync of the renamed entry before it: syncRenamedOnFat).
 */
export class DurableFs {
  constructor(readonly faults: FaultHook = noFaults) {}

  private mutated(op: string, p: string): void {
    this.faults.afterMutation(op, p);
  }

  /** How the sysroot's own files are written via a temp (write-via-temp.ts): on the disk, each durable. */
  private viaTemp(p: string): ViaTempOptions & { io: typeof hostIo } {
    return { io: hostIo, faults: this.faults, durable: true, rel: p, where: 'sysroot', afterRename: syncRenamedOnFat };
  }

  /** Replaces a file atomically: write temp, fsync, rename over, fsync the directory. */
  writeFileAtomic(file: string, data: string | Uint8Array, mode = 0o644): void {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    writeFileViaTemp(
      file,
      (fd) => {
        for (let off = 0; off < bytes.length; ) off += hostIo.write(fd, bytes, off, bytes.length - off);
      },
      { ...this.viaTemp(file), mode },
    );
  }

  /** Points a symlink at a new target atomically: symlink to a temp name, rename over, fsync dir. */
  replaceSymlink(link: string, target: string): void {
    commitViaTemp(
      link,
      (tmp) => {
        hostIo.symlink(target, tmp);
        this.mutated('symlink', tmp);
      },
      this.viaTemp(link),
    );
  }

  /**
   * Makes an entry of any kind (a directory filled with `make`: a kernel's copy) under a
   * temp name beside `dest` and renames it there, durably; an error removes it.
   */
  createViaTemp(dest: string, make: (tmp: string) => void): void {
    commitViaTemp(dest, make, this.viaTemp(dest));
  }

  /**
   * Removes the leftovers of writes a crash cut short in directory `dir` (recovery, under
   * the writer lock): every name of the one temp scheme, and the old names an older
   * version used whose target `legacy` accepts (none without it). Returns the names removed.
   */
  removeTempLeftovers(dir: string, legacy?: (target: string) => boolean): string[] {
    const names = listDir(dir).filter((n) => isTempName(n) || (legacy !== undefined && isLegacyTempName(n, legacy)));
    for (const n of names) this.removeTree(path.join(dir, n));
    return names;
  }

  /** Renames (a file or a whole directory) and makes both directory entries durable. */
  rename(from: string, to: string): void {
    try {
      fs.renameSync(from, to);
    } catch (err) {
      throw ioError(err, to, from, 'sysroot');
    }
    this.mutated('rename', to);
    syncRenamedOnFat(to);
    fsyncDir(path.dirname(to));
    if (path.dirname(from) !== path.dirname(to)) fsyncDir(path.dirname(from));
  }

  mkdir(dir: string, mode = 0o755): void {
    try {
      fs.mkdirSync(dir, { mode });
    } catch (err) {
      if (errnoOf(err) === 'EEXIST') return;
      throw ioError(err, dir, dir, 'sysroot');
    }
    this.mutated('mkdir', dir);
    fsyncDir(path.dirname(dir));
  }

  /** Removes a tree (not following symlinks). Missing is fine. */
  removeTree(p: string): void {
    removeTreeNow(p, this.faults);
  }

  unlink(p: string): void {
    try {
      fs.unlinkSync(p);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return;
      throw ioError(err, p, p, 'sysroot');
    }
    this.mutated('unlink', p);
  }

  /** Unlinks a file and makes its absence durable (fsync of the directory) before anything written after it. Missing is fine. */
  unlinkDurably(p: string): void {
    this.unlink(p);
    fsyncDir(path.dirname(p));
  }
}

/**
 * Makes everything written under `p` durable with one syncfs (`sync -f`; see
 * syncFilesystemNow), run on a tree worker so that the fork of sync(1) does not stall
 * the caller's event loop.
 */
export async function syncFilesystem(p: string): Promise<void> {
  await runTreeTask(treeTasks.syncFilesystem, { path: p, env: { ...process.env } });
}

/**
 * fsyncs each path (a file or a directory), on libuv's thread pool so the caller's event
 * loop keeps running: for the few files written after a `syncFilesystem` that covered
 * the rest. An error is IO (or NO_SPACE) naming the path, as a failed sync is.
 */
export async function fsyncPaths(paths: readonly string[]): Promise<void> {
  for (const p of paths) {
    let h: fs.promises.FileHandle | undefined;
    try {
      h = await fs.promises.open(p, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      await h.sync();
    } catch (err) {
      const e = (err as NodeJS.ErrnoException).code;
      throw new StagedrootError(e === 'ENOSPC' || e === 'EDQUOT' ? 'NO_SPACE' : 'IO', `Cannot make ${p} durable: ${(err as Error).message}`, { path: p, ...(e === undefined ? {} : { errno: e }), cause: err });
    } finally {
      await h?.close();
    }
  }
}

/** Writes a JSON file atomically through the durable layer. */
export function writeJson(dfs: DurableFs, file: string, value: unknown): void {
  dfs.writeFileAtomic(file, JSON.stringify(value) + '\n');
}

/** What writeJson wrote, read against its schema (STATE_CORRUPT naming the file otherwise), or null when the file is absent. */
export function readJsonState<S extends z.ZodTypeAny>(file: string, schema: S, what: string): z.output<S> | null {
  const text = readText(file);
  return text === null ? null : parseJsonState(text, file, schema, what);
}
