import * as fs from 'node:fs';
import * as path from 'node:path';
import { errnoOf } from '../../errors.js';
import { noFaults, type FaultHook } from '../core/faults.js';
import { fsyncDir } from '../core/fsync-dir.js';
import { ioError } from '../core/io-error.js';
import { readXattrs, writeXattrs } from '../core/xattr.js';
import { bytesOfName, childPath, hasRawBytes, nameFromBytes } from '../core/names.js';
import { readNames, walk } from '../core/walk.js';
import { isTempName } from '../core/temp-names.js';
import { commitViaTemp, type CommitIo } from './write-via-temp.js';
import { applyAttrs, attrsOfStat, fdAttrCalls, hostAttrCalls } from '../core/entry-attrs.js';
import { copyFileInto, createFile } from '../core/new-entry.js';
import { makeFifo } from '../core/path-tool.js';

/** lstat, or null when nothing is there. */
export function lstatOrNull(host: string | Buffer): fs.Stats | null {
  try {
    return fs.lstatSync(host);
  } catch (err) {
    const e = errnoOf(err);
    if (e === 'ENOENT' || e === 'ENOTDIR') return null;
    throw ioError(err, String(host), String(host), 'sysroot');
  }
}

/**
 * Copies one entry of a live tree to a private place outside every tree (a kept-aside
 * local version): a file's bytes, a symlink's target, a directory (empty, or with
 * everything below it when `recursive`), each with its mode, owner and times, made
 * durable. Parents of `dstHost` are created private (0700): a kept `etc/shadow` stays
 * as private as the original. An existing `dstHost` is kept (a redo after a crash).
 */
export function copyOut(srcHost: string | Buffer, dstHost: string, o: { recursive?: boolean; faults?: FaultHook } = {}): boolean {
  const faults = o.faults ?? noFaults;
  const st = lstatOrNull(srcHost);
  if (st === null) return false;
  const dir = path.dirname(dstHost);
  const done = lstatOrNull(bytesOf(dstHost)) !== null;
  if (!done) mkdirsPrivate(dir, faults);
  // What a copy a crash cut short left beside its place (a redo comes here, under the lock).
  removeLeftovers(dir, path.basename(dstHost), faults);
  if (done) return true;
  commitViaTemp(dstHost, (tmp) => copyAny(bytesOf(srcHost), bytesOf(tmp), st, o.recursive ?? false, faults), { io: bytesIo, faults, durable: true, rel: dstHost, where: 'sysroot' });
  return true;
}

/** The commit's system calls on host path strings whose non-UTF-8 names are escaped. */
const bytesIo: CommitIo = {
  rename: (from, to) => fs.renameSync(bytesOf(from), bytesOf(to)),
  removeTree: (host) => fs.rmSync(bytesOf(host), { recursive: true, force: true }),
  fsyncDir: (dir) => fsyncDir(dir),
};

/**
 * Removes the temp entries of copies a crash cut short in `dir`: the one temp scheme's,
 * and an older version's `NAME.tmp-PID` beside `name`.
 */
function removeLeftovers(dir: string, name: string, faults: FaultHook): void {
  let names: string[];
  try {
    names = readNames(bytesOf(dir));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw ioError(err, dir, dir, 'sysroot');
  }
  for (const n of names) {
    if (!isTempName(n) && !(n.startsWith(`${name}.tmp-`) && /^\d+$/.test(n.slice(name.length + 5)))) continue;
    fs.rmSync(bytesOf(`${dir}/${n}`), { recursive: true, force: true });
    faults.afterMutation('remove', `${dir}/${n}`);
  }
}

/** A host path as the bytes the syscall takes (a tree path string escapes a name that is not UTF-8, names.ts). */
function bytesOf(p: string | Buffer): Buffer {
  return typeof p === 'string' ? (hasRawBytes(p) ? bytesOfName(p) : Buffer.from(p)) : p;
}

/**
 * Paths are bytes all the way down: a name that is not UTF-8 is copied as it is. A
 * directory's children come from the one walker (walk.ts); each directory gets its
 * attributes and an fsync after its children, as the copy of a single directory does.
 */
function copyAny(src: Buffer, dst: Buffer, st: fs.Stats, recursive: boolean, faults: FaultHook): void {
  if (!st.isDirectory()) return copyLeaf(src, dst, st, faults);
  makeDir(dst, faults);
  if (recursive) {
    const dirs: fs.Stats[] = []; // the source directories entered and not yet left
    for (const step of walk(src)) {
      const to = childPath(dst, step.rel) as Buffer;
      if (step.leave) {
        finishDir(step.host as Buffer, to, dirs.pop()!);
        continue;
      }
      const cst = fs.lstatSync(step.host);
      if (cst.isDirectory() && step.entry.dirent.isDirectory()) {
        makeDir(to, faults);
        dirs.push(cst);
      } else {
        step.skip();
        copyLeaf(step.host as Buffer, to, cst, faults);
      }
    }
  }
  finishDir(src, dst, st);
}

function makeDir(dst: Buffer, faults: FaultHook): void {
  fs.mkdirSync(dst, { mode: 0o700 });
  faults.afterMutation('mkdir', nameFromBytes(dst));
}

/** The source's extended attributes (labels, ACLs, a capability) onto the copy. */
function copyXattrs(src: Buffer, dst: Buffer): void {
  const attrs = readXattrs(src);
  if (attrs.length > 0) writeXattrs(dst, attrs, { rel: nameFromBytes(dst) });
}

/** A copied directory's owner, mode, times and extended attributes, then an fsync: after its children. */
function finishDir(src: Buffer, dst: Buffer, st: fs.Stats): void {
  applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { xattrs: () => copyXattrs(src, dst) });
  fsyncDir(dst);
}

/**
 * A symlink, a regular file or a FIFO, as the tree copies make them (copy-tree.ts,
 * RootFs); devices and sockets are not state anyone keeps: skipped.
 */
function copyLeaf(src: Buffer, dst: Buffer, st: fs.Stats, faults: FaultHook): void {
  const shown = nameFromBytes(dst);
  if (st.isSymbolicLink()) {
    fs.symlinkSync(fs.readlinkSync(src, { encoding: 'buffer' }), dst);
    faults.afterMutation('symlink', shown);
    applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { symlink: true, xattrs: () => copyXattrs(src, dst) });
  } else if (st.isFIFO()) {
    makeFifo(dst, st.mode, shown);
    faults.afterMutation('mkfifo', shown);
    applyAttrs(hostAttrCalls, dst, attrsOfStat(st), { xattrs: () => copyXattrs(src, dst) });
  } else if (st.isFile()) {
    const fd = createFile(dst);
    try {
      copyFileInto(src, fd, shown);
      applyAttrs(fdAttrCalls(fd), dst, attrsOfStat(st), { xattrs: () => copyXattrs(src, dst) });
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    faults.afterMutation('copy', shown);
  }
}

function mkdirsPrivate(dir: string, faults: FaultHook): void {
  if (lstatOrNull(bytesOf(dir)) !== null) return;
  mkdirsPrivate(path.dirname(dir), faults);
  try {
    fs.mkdirSync(bytesOf(dir), { mode: 0o700 });
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw ioError(err, dir, dir, 'sysroot');
    return;
  }
  faults.afterMutation('mkdir', dir);
  fsyncDir(path.dirname(dir));
}
