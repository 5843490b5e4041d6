import * as fs from 'node:fs';
import { StagedrootError, errnoOf } from '../../errors.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { hashFile } from '../core/hash.js';
import { ManifestReader, ManifestWriter, entryFromStat, readLinkTarget, unchangedSince } from '../manifests/manifest.js';
import { formatEntry } from '../manifests/manifest-line.js';
import { bytesOfName, hasRawBytes, hostPath } from '../core/names.js';
import { makeFifo } from '../core/path-tool.js';
import { applyAttrs, attrsOfStat, hostAttrCalls } from '../core/entry-attrs.js';
import { cloneFile, copyFileInto, createFile } from '../core/new-entry.js';
import { isUnder } from '../core/paths.js';
import { ioError } from '../core/io-error.js';
import { walkEntries, type WalkRange } from '../core/walk.js';
import { readXattrs, writeXattrs, xattrDigest, xattrsSupported, type XattrPolicy, type Xattrs } from '../core/xattr.js';

export type CopyMode = 'reflink' | 'copy';

export interface CopyPolicy {
  /** Tree prefixes whose regular files are hardlinked (immutable content), e.g. ["usr"]. */
  hardlinkPrefixes: string[];
  /** Prefixes inside those that are copied all the same (mutable databases in a linked tree). */
  copyPrefixes?: string[];
  /** How the rest is copied: reflink where the filesystem supports it (else copy), or plain copy. */
  mode: CopyMode;
}

export interface CopyProgress {
  done: number;
  total: number | null;
  /** The size of the files copied or looked at (a file linked under trust is not looked at: not counted). */
  bytes: number;
}

/**
 * What a copy of a running root leaves out (adoption): other filesystems are never
 * entered. Their mount points (and the directories `hollow` names) are made as empty
 * directories with their attributes; `omit` is not made at all (the sysroot itself).
 */
export interface CopyExclude {
  /** Only this filesystem (st_dev) is copied: a directory on another is left empty, anything else on another is skipped. */
  device?: number;
  /** Directories made empty (mount points, /proc, /tmp, …). */
  hollow: string[];
  /** Entries left out entirely. */
  omit: string[];
}

export interface CopyTreeOptions {
  src: string;
  dst: string;
  policy: CopyPolicy;
  exclude?: CopyExclude;
  /** The source tree's manifest: hashes of unchanged files are reused from it (and a split copy is cut by it). */
  srcManifest?: string;
  /** Where to write the new tree's manifest; omitted with `trust`: none is written. */
  manifestOut?: string;
  /**
   * Trust the source's manifest for the trees under the hardlink prefixes (as a btrfs
   * snapshot does: usr/ is read-only on a booted host): their files are linked with no
   * lstat each (one call a file, as `cp -al` costs), and no manifest is written at all:
   * the caller writes it afterwards from the source's manifest (snapshotManifest), which
   * takes those trees' lines as they are and walks the rest.
   */
  trust?: boolean;
  faults?: FaultHook;
  /** Expected entry count (for progress); null when unknown. */
  total?: number | null;
  onProgress?: (p: CopyProgress) => void;
  /** Entries that cannot be recreated (sockets, devices) are skipped and reported here. */
  onSkip?: (rel: string, why: string) => void;
  /** An extended attribute the destination refuses: an error ('strict', the default) or dropped and reported. */
  xattrPolicy?: XattrPolicy;
  onXattrDrop?: (rel: string, name: string, why: string) => void;
  /** Called before each entry; throws to stop the copy (an AbortSignal that fired). */
  checkAbort?: () => void;
  /**
   * One part of a copy split over workers (see copy-split.ts): the entries of this range
   * only, the source manifest read from `srcManifestStart`; the directories in `spine`
   * exist already and are finished by the caller, as is the root.
   */
  part?: { range: WalkRange; spine: string[]; srcManifestStart: number };
}

export interface CopyResult {
  entries: number;
  bytes: number;
  hardlinked: number;
  copied: number;
  hashed: number;
  /** For a part: every name of the files it copied (not linked to the source) that have other links, as [dev:ino, path]. */
  multiLinked?: [string, string][];
}


/**
 * Builds a new deployment tree from an existing one in a single walk, writing its
 * manifest on the way. Files under the hardlink prefixes share their inode with the
 * source (their hash is reused from the source manifest when size and mtime match);
 * the rest is reflinked or copied, so the new tree can be changed freely.
 */
export function copyTree(o: CopyTreeOptions): CopyResult {
  const faults = o.faults ?? noFaults;
  if ((o.trust === true) === (o.manifestOut !== undefined)) {
    throw new StagedrootError('USAGE', 'copyTree takes either manifestOut or trust (then the caller writes the manifest from the source manifest), not both or neither');
  }
  const out = o.manifestOut === undefined ? null : new ManifestWriter(o.manifestOut, faults);
  const prev = out !== null && o.srcManifest ? new ManifestReader(o.srcManifest, o.part?.srcManifestStart ?? 0) : null;
  const spine = new Set(o.part?.spine ?? []);
  // Below these (strictly), files are linked on readdir's word, with no lstat.
  const trustedUnder = o.trust === true ? o.policy.hardlinkPrefixes.filter((p) => p !== '').map((p) => `${p}/`) : [];
  const isTrusted = (rel: string): boolean => {
    for (const t of trustedUnder) if (rel.startsWith(t)) return true;
    return false;
  };
  const reflink = o.policy.mode === 'reflink';
  let buf: Buffer | undefined; // for plain copies, allocated on the first one
  const inodes = new Map<string, { dst: string | Buffer; x: string | undefined }>(); // dev:ino -> the first copy, for hardlinks inside copied parts
  const res: CopyResult = { entries: 0, bytes: 0, hardlinked: 0, copied: 0, hashed: 0 };
  const total = o.total ?? null;
  let nextReport = 0;

  // One probe per tree: a source filesystem without extended attributes costs no
  // per-entry listxattr at all.
  const srcXattrs = xattrsSupported(o.src);
  const readAttrs = (host: string | Buffer): Xattrs => (srcXattrs ? readXattrs(host) : []);
  const xo = { policy: o.xattrPolicy ?? 'strict', onDrop: o.onXattrDrop } as const;
  /** Sets a new entry's attributes (after chown, which clears file capabilities); returns the digest of those kept. */
  const putAttrs = (rel: string, dst: string | Buffer, attrs: Xattrs): string | undefined =>
    attrs.length === 0 ? undefined : xattrDigest(writeXattrs(dst, attrs, { rel, ...xo }));
  const dirAttrs = new Map<string, Xattrs>(); // set when the directory is left (a default ACL must not reach the copies of its children)

  /** Links or copies one file; returns the digest of the attributes it set when it made a new inode, null for a hardlink. */
  const linkOrCopy = (rel: string, src: string | Buffer, dst: string | Buffer, st: fs.Stats): { x: string | undefined } | null => {
    const hardlink = o.policy.hardlinkPrefixes.some((p) => isUnder(rel, p)) && !(o.policy.copyPrefixes ?? []).some((p) => isUnder(rel, p));
    if (hardlink) {
      try {
        fs.linkSync(src, dst);
        faults.afterMutation('link', String(dst));
        res.hardlinked += 1;
        return null;
      } catch (err) {
        const e = errnoOf(err);
        // As ostree does: fall back to a copy when the link count or device forbids a link.
        if (e !== 'EMLINK' && e !== 'EXDEV' && e !== 'EPERM') throw ioError(err, rel, String(dst), 'sysroot');
      }
    } else if (st.nlink > 1) {
      const key = `${st.dev}:${st.ino}`;
      const first = inodes.get(key);
      if (first !== undefined) {
        fs.linkSync(first.dst, dst);
        faults.afterMutation('link', String(dst));
        if (o.part) res.multiLinked!.push([`${st.dev}:${st.ino}`, rel]);
        return { x: first.x };
      }
    }
    if (reflink) cloneFile(src, dst);
    else copyBytes(rel, src, dst, (buf ??= Buffer.allocUnsafe(1 << 20)));
    faults.afterMutation('copy', String(dst));
    const x = applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { xattrs: () => putAttrs(rel, dst, readAttrs(src)) });
    res.copied += 1;
    if (st.nlink > 1) {
      inodes.set(`${st.dev}:${st.ino}`, { dst, x });
      if (o.part) (res.multiLinked ??= []).push([`${st.dev}:${st.ino}`, rel]);
    }
    return { x };
  };

  /** A file under a trusted prefix: linked (one call); copied only where a link is refused. */
  const linkTrusted = (rel: string, src: string | Buffer, dst: string | Buffer): void => {
    try {
      fs.linkSync(src, dst);
    } catch (err) {
      const e = errnoOf(err);
      if (e !== 'EMLINK' && e !== 'EXDEV' && e !== 'EPERM') throw ioError(err, rel, String(dst), 'sysroot');
      const st = fs.lstatSync(src);
      linkOrCopy(rel, src, dst, st); // tries the link once more, then copies
      res.bytes += st.size;
      return;
    }
    faults.afterMutation('link', String(dst));
    res.hardlinked += 1;
  };

  const counted = (): void => {
    res.entries += 1;
    if (o.onProgress && res.entries >= nextReport) {
      o.onProgress({ done: res.entries, total, bytes: res.bytes });
      nextReport = res.entries + 1000;
    }
  };
  const dirs: fs.Stats[] = []; // the source directories entered and not yet left
  const omit = new Set(o.exclude?.omit ?? []);
  const hollow = new Set(o.exclude?.hollow ?? []);
  const device = o.exclude?.device;
  /** An empty directory for a mount point: made with its attributes at once (no children to wait for). */
  const hollowDir = (rel: string, dst: string | Buffer, st: fs.Stats): void => {
    fs.mkdirSync(dst, { mode: 0o700 });
    faults.afterMutation('mkdir', String(dst));
    applyAttrs(hostAttrCalls, dst, attrsOfStat(st));
    out?.write(entryFromStat(rel, st, {}));
    counted();
  };

  try {
    walkEntries(o.src, {
      enter(rel, host, de) {
        o.checkAbort?.();
        const dst = hostPath(o.dst, rel);
        if (de.dirent.isFile() && isTrusted(rel)) {
          try {
            linkTrusted(rel, host, dst);
          } catch (err) {
            if (err instanceof StagedrootError) throw err;
            throw ioError(err, rel, String(dst), 'sysroot');
          }
          counted();
          return false;
        }
        if (omit.has(rel)) return false;
        let st: fs.Stats;
        try {
          st = fs.lstatSync(host);
        } catch (err) {
          throw ioError(err, rel, String(host), 'sysroot');
        }
        if (hollow.has(rel) || (device !== undefined && st.dev !== device)) {
          if (!st.isDirectory()) {
            o.onSkip?.(rel, 'mount point');
            return false;
          }
          try {
            hollowDir(rel, dst, st);
          } catch (err) {
            throw ioError(err, rel, String(dst), 'sysroot');
          }
          return false;
        }
        let extra: { h?: string; l?: string; x?: string } = {};
        let copy: { x: string | undefined } | null = null;
        try {
          if (st.isDirectory()) {
            if (!spine.has(rel)) {
              fs.mkdirSync(dst, { mode: 0o700 });
              faults.afterMutation('mkdir', String(dst));
            }
            const attrs = readAttrs(host);
            if (attrs.length > 0) {
              dirAttrs.set(rel, attrs);
              extra = { x: xattrDigest(attrs) };
            }
          } else if (st.isFile()) {
            copy = linkOrCopy(rel, host, dst, st);
            res.bytes += st.size;
            if (out === null) {
              counted();
              return false;
            }
            // The source's hash is reused only when its line was recorded from this very
            // inode, unchanged since (see unchangedSince): never on size and mtime alone.
            const raw = prev?.seekRaw(rel) ?? null;
            const old = raw === null ? null : prev!.entryOf(raw);
            const x = copy === null ? xattrDigest(readAttrs(host)) : copy.x;
            if (old !== null && unchangedSince(old, st)) {
              extra = { h: old.h, x };
            } else {
              extra = { h: hashFile(host), x };
              res.hashed += 1;
            }
          } else if (st.isSymbolicLink()) {
            const target = readLinkTarget(host);
            fs.symlinkSync(hasRawBytes(target) ? bytesOfName(target) : target, dst);
            faults.afterMutation('symlink', String(dst));
            extra = { l: target, x: applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { symlink: true, xattrs: () => putAttrs(rel, dst, readAttrs(host)) }) };
          } else if (st.isFIFO()) {
            makeFifo(dst, st.mode, rel);
            faults.afterMutation('mkfifo', String(dst));
            extra = { x: applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { xattrs: () => putAttrs(rel, dst, readAttrs(host)) }) };
          } else {
            o.onSkip?.(rel, st.isSocket() ? 'socket' : 'device node');
            return false;
          }
        } catch (err) {
          if (err instanceof StagedrootError) throw err;
          throw ioError(err, rel, String(dst), 'sysroot');
        }
        if (out === null) {
          // Trusting: the manifest is written afterwards, from the source's.
        } else if (st.isFile()) {
          // The new tree's own inode and ctime (a link changes the ctime, a copy is a new inode).
          out.write(entryFromStat(rel, fs.lstatSync(dst), extra));
        } else {
          // A directory, symlink or FIFO: its old line is consumed here (checked, unless it
          // is the same line), so that file seeks never parse lines they only pass over.
          const line = formatEntry(entryFromStat(rel, st, extra));
          const raw = prev?.seekRaw(rel) ?? null;
          if (raw !== null && raw.line !== line) prev!.entryOf(raw);
          out.writeLine(rel, line);
        }
        counted();
        if (!st.isDirectory()) return false;
        dirs.push(st);
        return true;
      },
      leave(rel) {
        // Directory attributes last: their mode may forbid writing children, creating
        // children changes their mtime, and a default ACL would reach the children.
        const st = dirs.pop()!;
        if (spine.has(rel)) return; // the caller finishes it, once every part is done
        const dst = hostPath(o.dst, rel);
        try {
          const attrs = dirAttrs.get(rel);
          if (attrs !== undefined) dirAttrs.delete(rel);
          applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { xattrs: () => attrs !== undefined && writeXattrs(dst, attrs, { rel, ...xo }) });
        } catch (err) {
          throw ioError(err, rel, String(dst), 'sysroot');
        }
        faults.afterMutation('setattr', String(dst));
      },
    }, o.part?.range);
    if (!o.part) finishDirectory(o.src, o.dst, null, o, faults);
  } finally {
    prev?.close();
    out?.close(false);
  }
  o.onProgress?.({ done: res.entries, total: total ?? res.entries, bytes: res.bytes });
  return res;
}

/**
 * A directory's owner, extended attributes, mode and times from its source, set after its
 * children were made: the root (`rel` null; its owner and times are left as they are), or
 * a directory that parts of a split copy share.
 */
export function finishDirectory(srcRoot: string, dstRoot: string, rel: string | null, o: Pick<CopyTreeOptions, 'xattrPolicy' | 'onXattrDrop'>, faults: FaultHook = noFaults): void {
  const src = rel === null ? srcRoot : hostPath(srcRoot, rel);
  const dst = rel === null ? dstRoot : hostPath(dstRoot, rel);
  const st = fs.lstatSync(src);
  try {
    // The root keeps its owner and times (the caller made it); its mode and attributes are the source's.
    const a = attrsOfStat(st);
    applyAttrs(hostAttrCalls, dst, rel === null ? { mode: a.mode } : a, { xattrs: () => writeXattrs(dst, xattrsSupported(srcRoot) ? readXattrs(src) : [], { rel: rel ?? '/', policy: o.xattrPolicy ?? 'strict', onDrop: o.onXattrDrop }) });
  } catch (err) {
    throw ioError(err, rel ?? '/', String(dst), 'sysroot');
  }
  faults.afterMutation('setattr', String(dst));
}

/** A plain copy of a file's bytes into a new file (the copy policy: no blocks shared with the source). */
function copyBytes(rel: string, src: string | Buffer, dst: string | Buffer, buf: Buffer): void {
  const to = createFile(dst);
  try {
    copyFileInto(src, to, rel, buf);
  } finally {
    fs.closeSync(to);
  }
}
