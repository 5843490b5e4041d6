import * as fs from 'node:fs';
import { StagedrootError, errnoOf } from '../errors.js';
import { noFaults, type FaultHook } from './faults.js';
import { hashFile } from './hash.js';
import { ManifestReader, ManifestWriter, entryFromStat, isFileLineFor, type RawLine } from './manifest.js';
import { isUnder } from './paths.js';
import { ioError } from './root-fs.js';
import { walkTree } from './walk.js';

export type CopyMode = 'reflink' | 'copy';

export interface CopyPolicy {
  /** Tree prefixes whose regular files are hardlinked (immutable content), e.g. ["usr"]. */
  hardlinkPrefixes: string[];
  /** How the rest is copied: reflink where the filesystem supports it (else copy), or plain copy. */
  mode: CopyMode;
}

export interface CopyProgress {
  done: number;
  total: number | null;
  bytes: number;
}

export interface CopyTreeOptions {
  src: string;
  dst: string;
  policy: CopyPolicy;
  /** The source tree's manifest: hashes of unchanged files are reused from it. */
  srcManifest?: string;
  /** Where to write the new tree's manifest. */
  manifestOut: string;
  faults?: FaultHook;
  /** Expected entry count (for progress); null when unknown. */
  total?: number | null;
  onProgress?: (p: CopyProgress) => void;
  /** Entries that cannot be recreated (sockets, devices) are skipped and reported here. */
  onSkip?: (rel: string, why: string) => void;
  /** Called before each entry; throws to stop the copy (an AbortSignal that fired). */
  checkAbort?: () => void;
}

export interface CopyResult {
  entries: number;
  bytes: number;
  hardlinked: number;
  copied: number;
  hashed: number;
}

const canChown = typeof process.getuid === 'function' && process.getuid() === 0;

/**
 * A stat time as utimes takes it: the seconds Node would take from the Stats' Date
 * (rounded milliseconds / 1000) without making the Date; before 1970 the Date itself,
 * as Node turns a negative number into "now".
 */
function utime(ms: number): number | Date {
  return ms >= 0 ? Math.round(ms) / 1000 : new Date(Math.round(ms));
}

/**
 * What the base manifest already knows of a regular file: its line, to reuse whole, when
 * the file is unchanged (same size, mtime, mode, owner; no parse, no hash, no
 * serialisation); else its hash when size and mtime match; else null (hash the file).
 * `sameMtime` is false when the new inode's mtime differs from the source's.
 */
export function knownFile(prev: ManifestReader | null, raw: RawLine | null, rel: string, st: fs.Stats, sameMtime: boolean): string | { h: string } | null {
  if (raw === null) return null;
  if (sameMtime && isFileLineFor(raw.line, rel, st)) return raw.line;
  const old = prev!.entryOf(raw);
  return old.t === 'f' && old.s === st.size && old.mt === Math.trunc(st.mtimeMs) && old.h !== undefined ? { h: old.h } : null;
}

/**
 * Builds a new deployment tree from an existing one in a single walk, writing its
 * manifest on the way. Files under the hardlink prefixes share their inode with the
 * source (their hash is reused from the source manifest when size and mtime match);
 * the rest is reflinked or copied, so the new tree can be changed freely.
 */
export function copyTree(o: CopyTreeOptions): CopyResult {
  const faults = o.faults ?? noFaults;
  const prev = o.srcManifest ? new ManifestReader(o.srcManifest) : null;
  const out = new ManifestWriter(o.manifestOut, faults);
  const reflink = o.policy.mode === 'reflink';
  let buf: Buffer | undefined; // for plain copies, allocated on the first one
  const inodes = new Map<string, string>(); // dev:ino -> dst host path, for hardlinks inside copied parts
  const res: CopyResult = { entries: 0, bytes: 0, hardlinked: 0, copied: 0, hashed: 0 };
  const total = o.total ?? null;
  let nextReport = 0;

  /** Links or copies one file; returns the copy's mtime in ms when it made a new inode. */
  const linkOrCopy = (rel: string, src: string, dst: string, st: fs.Stats): number | null => {
    const hardlink = o.policy.hardlinkPrefixes.some((p) => isUnder(rel, p));
    if (hardlink) {
      try {
        fs.linkSync(src, dst);
        faults.afterMutation('link', dst);
        res.hardlinked += 1;
        return null;
      } catch (err) {
        const e = errnoOf(err);
        // As ostree does: fall back to a copy when the link count or device forbids a link.
        if (e !== 'EMLINK' && e !== 'EXDEV' && e !== 'EPERM') throw ioError(err, rel, dst, 'sysroot');
      }
    } else if (st.nlink > 1) {
      const key = `${st.dev}:${st.ino}`;
      const first = inodes.get(key);
      if (first !== undefined) {
        fs.linkSync(first, dst);
        faults.afterMutation('link', dst);
        return Math.trunc(fs.lstatSync(first).mtimeMs);
      }
      inodes.set(key, dst);
    }
    if (reflink) fs.copyFileSync(src, dst, fs.constants.COPYFILE_FICLONE);
    else copyBytes(src, dst, (buf ??= Buffer.allocUnsafe(1 << 20)));
    faults.afterMutation('copy', dst);
    if (canChown) fs.chownSync(dst, st.uid, st.gid);
    fs.chmodSync(dst, st.mode & 0o7777);
    fs.utimesSync(dst, utime(st.atimeMs), utime(st.mtimeMs));
    res.copied += 1;
    // utimes goes through float seconds and may land a nanosecond below the source's
    // millisecond (…396 ms → …395.999999): the manifest records the copy's own mtime,
    // or the next stage would miss the hash cache and re-hash the file.
    return Math.trunc(fs.lstatSync(dst).mtimeMs);
  };

  try {
    walkTree(o.src, {
      enter(rel, host, st) {
        o.checkAbort?.();
        const dst = o.dst + '/' + rel;
        let extra: { h?: string; l?: string } = {};
        let copyMtime: number | null = null;
        let reused: string | null = null;
        try {
          if (st.isDirectory()) {
            fs.mkdirSync(dst, { mode: 0o700 });
            faults.afterMutation('mkdir', dst);
          } else if (st.isFile()) {
            copyMtime = linkOrCopy(rel, host, dst, st);
            const known = knownFile(prev, prev?.seekRaw(rel) ?? null, rel, st, copyMtime === null || copyMtime === Math.trunc(st.mtimeMs));
            if (typeof known === 'string') {
              reused = known;
            } else {
              extra = { h: known?.h ?? hashFile(host) };
              if (known === null) res.hashed += 1;
            }
            res.bytes += st.size;
          } else if (st.isSymbolicLink()) {
            const target = fs.readlinkSync(host);
            fs.symlinkSync(target, dst);
            faults.afterMutation('symlink', dst);
            if (canChown) fs.lchownSync(dst, st.uid, st.gid);
            extra = { l: target };
          } else {
            o.onSkip?.(rel, 'not a file, directory or symlink (device, FIFO or socket)');
            return;
          }
        } catch (err) {
          if (err instanceof StagedrootError) throw err;
          throw ioError(err, rel, dst, 'sysroot');
        }
        if (reused !== null) {
          out.writeLine(rel, reused);
        } else if (st.isFile()) {
          const entry = entryFromStat(rel, st, extra);
          if (copyMtime !== null) entry.mt = copyMtime;
          out.write(entry);
        } else {
          // A directory or symlink: its old line is consumed here (checked, unless it is
          // the same line), so that file seeks never parse lines they only pass over.
          const line = JSON.stringify(entryFromStat(rel, st, st.isDirectory() ? {} : extra));
          const raw = prev?.seekRaw(rel) ?? null;
          if (raw !== null && raw.line !== line) prev!.entryOf(raw);
          out.writeLine(rel, line);
        }
        res.entries += 1;
        if (o.onProgress && res.entries >= nextReport) {
          o.onProgress({ done: res.entries, total, bytes: res.bytes });
          nextReport = res.entries + 1000;
        }
      },
      leave(rel, _host, st) {
        // Directory attributes last: their mode may forbid writing children, and
        // creating children changes their mtime.
        const dst = o.dst + '/' + rel;
        try {
          if (canChown) fs.chownSync(dst, st.uid, st.gid);
          fs.chmodSync(dst, st.mode & 0o7777);
          fs.utimesSync(dst, utime(st.atimeMs), utime(st.mtimeMs));
        } catch (err) {
          throw ioError(err, rel, dst, 'sysroot');
        }
        faults.afterMutation('setattr', dst);
      },
    });
    const rootSt = fs.lstatSync(o.src);
    fs.chmodSync(o.dst, rootSt.mode & 0o7777);
    faults.afterMutation('setattr', o.dst);
  } finally {
    prev?.close();
    out.close(false);
  }
  o.onProgress?.({ done: res.entries, total: total ?? res.entries, bytes: res.bytes });
  return res;
}

/**
 * A plain copy of a file's bytes into a new file, for the copy policy. Not
 * fs.copyFileSync: libuv copies with copy_file_range(2), which XFS and btrfs turn into a
 * reflink, so the copy would share its blocks with the source after all.
 */
function copyBytes(src: string, dst: string, buf: Buffer): void {
  const from = fs.openSync(src, 'r');
  try {
    const to = fs.openSync(dst, 'w', 0o600);
    try {
      for (let n = fs.readSync(from, buf, 0, buf.length, null); n > 0; n = fs.readSync(from, buf, 0, buf.length, null)) {
        for (let off = 0; off < n; ) off += fs.writeSync(to, buf, off, n - off);
      }
    } finally {
      fs.closeSync(to);
    }
  } finally {
    fs.closeSync(from);
  }
}
