import { createHash, type Hash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hashFile } from '../core/hash.js';
import { entryFromStat } from '../manifests/manifest.js';
import type { ManifestEntry } from '../manifests/manifest-line.js';
import { hostIo, type TreeIo } from './tree-io.js';
import { xattrDigest, type Xattrs } from '../core/xattr.js';
import { processUmask } from '../core/umask.js';

/**
 * A tree seen through an in-memory layer (a userspace overlayfs): reads fall through to
 * the tree on disk, which is never written; every write lands in memory. `stage
 * --dry-run` gives it to RootFs and runs the stage's own apply over it, so the dry run
 * makes exactly the stage's decisions (a file over a directory refused, unit links made
 * and removed, warnings) without writing a byte.
 *
 * File contents are kept in memory up to a bound (small files: unit files, configs that
 * later steps read back); beyond it only their size and sha256 are kept, and reading
 * such a file back is an EFBIG error. Memory stays O(update), never O(tree).
 */
export class OverlayIo implements TreeIo {
  /** Host path -> what is there now; null: removed (a whiteout). Absent: as on disk. */
  private readonly upper = new Map<string, Inode | null>();
  /** Names of the upper entries (whiteouts included) per directory. */
  private readonly children = new Map<string, Set<string>>();
  private readonly fds = new Map<number, Inode>();
  private nextFd = 1 << 20;
  private nextIno = 1;
  private kept = 0;
  private readonly umask = processUmask();

  /**
   * @param root the tree's root (host path)
   * @param o.empty the tree starts empty (the disk below it is not read; it need not exist)
   */
  constructor(
    readonly root: string,
    private readonly o: { empty?: boolean; keepBytes?: number; keepFileBytes?: number } = {},
  ) {
    if (o.empty) this.upper.set(root, this.inode('dir', 0o755, { opaque: true }));
  }

  // ------------------------------------------------------------------ reads

  lstat(host: string): fs.Stats | null {
    const at = this.get(host);
    if (at === 'disk') return hostIo.lstat(host);
    return at === null ? null : statsOf(at);
  }

  readlink(host: string): string {
    const at = this.get(host);
    if (at === 'disk') return hostIo.readlink(host);
    if (at === null) throw errno('ENOENT', 'readlink', host);
    if (at.kind !== 'symlink') throw errno('EINVAL', 'readlink', host);
    return at.target!;
  }

  readdir(host: string): string[] {
    const at = this.get(host);
    if (at === null) throw errno('ENOENT', 'scandir', host);
    if (at !== 'disk' && at.kind !== 'dir') throw errno('ENOTDIR', 'scandir', host);
    const names = new Set(at === 'disk' || !at.opaque ? hostIo.readdir(host) : []);
    for (const n of this.children.get(host) ?? []) {
      if (this.upper.get(`${host}/${n}`) === null) names.delete(n);
      else names.add(n);
    }
    return [...names].sort();
  }

  readFile(host: string): Buffer {
    const at = this.get(host);
    if (at === 'disk') return hostIo.readFile(host);
    if (at === null) throw errno('ENOENT', 'open', host);
    if (at.kind !== 'file') throw errno(at.kind === 'dir' ? 'EISDIR' : 'ELOOP', 'open', host);
    if (at.chunks !== null) return Buffer.concat(at.chunks);
    if (at.disk !== undefined) return hostIo.readFile(at.disk);
    throw errno('EFBIG', 'open', host, 'a dry run keeps only the size and hash of a large file it writes');
  }

  readXattrs(host: string): Xattrs {
    const at = this.get(host);
    if (at === 'disk') return hostIo.readXattrs(host);
    if (at === null) throw errno('ENOENT', 'listxattr', host);
    return at.xattrs ?? (at.disk !== undefined ? hostIo.readXattrs(at.disk) : []);
  }

  /** The manifest entry of what is at `host` now (null: nothing), as readEntry reads one from a disk. */
  entry(rel: string, host: string): ManifestEntry | null {
    const st = this.lstat(host);
    if (st === null) return null;
    const x = xattrDigest(this.readXattrs(host));
    const at = this.get(host) as Inode | 'disk';
    if (st.isFile()) return entryFromStat(rel, st, { h: at === 'disk' ? hashFile(host) : (at.sha256 ?? hashFile(at.disk!)), x });
    if (st.isSymbolicLink()) return entryFromStat(rel, st, { l: this.readlink(host), x });
    return entryFromStat(rel, st, { x });
  }

  // ------------------------------------------------------------------ writes

  mkdir(host: string, mode: number): void {
    this.mustBeAbsent(host, 'mkdir');
    this.put(host, this.inode('dir', mode & ~this.umask, { opaque: true }));
  }

  create(host: string, mode: number): number {
    this.mustBeAbsent(host, 'open');
    const node = this.inode('file', mode & ~this.umask, { chunks: [], hash: createHash('sha256') });
    this.put(host, node);
    const fd = this.nextFd++;
    this.fds.set(fd, node);
    return fd;
  }

  write(fd: number, data: Uint8Array, off: number, len: number): number {
    const node = this.open(fd);
    const part = data.subarray(off, off + len);
    node.hash!.update(part);
    node.size += len;
    if (node.chunks !== null) {
      if (node.size <= (this.o.keepFileBytes ?? 1 << 20) && this.kept + len <= (this.o.keepBytes ?? 64 << 20)) {
        node.chunks.push(Buffer.from(part));
        this.kept += len;
      } else {
        this.kept -= node.size - len;
        node.chunks = null;
      }
    }
    return len;
  }

  copyInto(srcHost: string | Buffer, fd: number): number {
    const from = fs.openSync(srcHost, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      let total = 0;
      for (let n = fs.readSync(from, buf, 0, buf.length, null); n > 0; n = fs.readSync(from, buf, 0, buf.length, null)) total += this.write(fd, buf, 0, n);
      return total;
    } finally {
      fs.closeSync(from);
    }
  }

  fchown(fd: number, uid: number, gid: number): void {
    setOwner(this.open(fd), uid, gid);
  }

  fchmod(fd: number, mode: number): void {
    this.open(fd).mode = mode & 0o7777;
  }

  futimes(fd: number, time: number): void {
    this.open(fd).mtimeMs = time * 1000;
  }

  fsync(): void {}

  close(fd: number): void {
    const node = this.open(fd);
    node.sha256 = node.hash!.digest('hex');
    node.hash = undefined;
    this.fds.delete(fd);
  }

  rename(from: string, to: string): void {
    const node = this.copyUp(from, 'rename');
    if (node.kind === 'dir') throw errno('EXDEV', 'rename', from, 'a dry run does not move directories');
    const there = this.get(to);
    if (there !== null && there !== 'disk' && there.kind === 'dir') throw errno('EISDIR', 'rename', to);
    if (there === 'disk' && hostIo.lstat(to)?.isDirectory()) throw errno('EISDIR', 'rename', to);
    this.drop(to);
    this.drop(from);
    this.put(to, node);
  }

  /** The entry leaves the layer's tree; where it lands is outside the tree, not the layer's: nothing is written there. */
  moveOut(host: string): void {
    if (this.get(host) === null) throw errno('ENOENT', 'rename', host);
    this.drop(host);
  }

  unlink(host: string): void {
    const at = this.get(host);
    if (at === null) throw errno('ENOENT', 'unlink', host);
    if ((at === 'disk' ? hostIo.lstat(host)?.isDirectory() : at.kind === 'dir') === true) throw errno('EISDIR', 'unlink', host);
    this.drop(host);
  }

  removeTree(host: string): void {
    if (this.get(host) === null) return;
    this.drop(host);
  }

  symlink(target: string, host: string): void {
    this.mustBeAbsent(host, 'symlink');
    this.put(host, this.inode('symlink', 0o777, { target, size: Buffer.byteLength(target) }));
  }

  link(existing: string, host: string): void {
    this.mustBeAbsent(host, 'link');
    const node = this.copyUp(existing, 'link');
    if (node.kind === 'dir') throw errno('EPERM', 'link', existing);
    node.nlink += 1;
    this.put(host, node);
  }

  copyFile(src: string, dst: string): void {
    const from = this.copyUp(src, 'copyfile');
    this.drop(dst);
    this.put(dst, { ...from, ino: this.nextIno++, dev: OVERLAY_DEV, nlink: 1, chunks: from.chunks && [...from.chunks], xattrs: [] });
  }

  mkfifo(host: string, mode: number): void {
    this.mustBeAbsent(host, 'mkfifo');
    this.put(host, this.inode('fifo', mode & 0o7777 & ~this.umask));
  }

  lchown(host: string, uid: number, gid: number): void {
    setOwner(this.copyUp(host, 'lchown'), uid, gid);
  }

  chmod(host: string, mode: number): void {
    this.copyUp(host, 'chmod').mode = mode & 0o7777;
  }

  utimes(host: string, time: number): void {
    this.copyUp(host, 'utime').mtimeMs = time * 1000;
  }

  writeXattrs(host: string, attrs: Xattrs): Xattrs {
    const node = this.copyUp(host, 'setxattr');
    const now = new Map(this.readXattrs(host));
    for (const [n, v] of attrs) now.set(n, v);
    node.xattrs = [...now].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return attrs;
  }

  replaceXattrs(host: string, attrs: Xattrs): Xattrs {
    this.copyUp(host, 'setxattr').xattrs = [...attrs];
    return attrs;
  }

  fsyncDir(): void {}

  // ------------------------------------------------------------------ internals

  /** What is at `host`: an upper entry, 'disk' (the tree's own, visible through the layer), or null. */
  private get(host: string): Inode | 'disk' | null {
    const here = this.upper.get(host);
    if (here !== undefined) return here;
    // The disk's entry shows unless an upper entry above it hides what is below.
    for (let dir = path.dirname(host); dir.length >= this.root.length; dir = path.dirname(dir)) {
      const above = this.upper.get(dir);
      if (above !== undefined && (above === null || above.kind !== 'dir' || above.opaque)) return null;
      if (dir === this.root) break;
    }
    return hostIo.lstat(host) === null ? null : 'disk';
  }

  /** The upper entry at `host`, made from the disk's when it has none yet. */
  private copyUp(host: string, call: string): Inode {
    const at = this.get(host);
    if (at === null) throw errno('ENOENT', call, host);
    if (at !== 'disk') return at;
    const st = hostIo.lstat(host)!;
    const kind: Kind = st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : st.isFIFO() ? 'fifo' : 'file';
    const node: Inode = {
      kind,
      ino: st.ino,
      dev: st.dev,
      nlink: st.nlink,
      mode: st.mode & 0o7777,
      uid: st.uid,
      gid: st.gid,
      size: st.size,
      mtimeMs: st.mtimeMs,
      opaque: false,
      chunks: null,
      xattrs: null,
      disk: host,
      ...(kind === 'symlink' ? { target: hostIo.readlink(host) } : {}),
    };
    this.upper.set(host, node); // a directory copied up keeps showing the disk's children
    this.index(host);
    return node;
  }

  private put(host: string, node: Inode | null): void {
    this.upper.set(host, node);
    this.index(host);
  }

  /** Removes the entry at `host` (with everything below it). */
  private drop(host: string): void {
    const at = this.upper.get(host);
    if (at !== undefined && at !== null) at.nlink -= 1;
    for (const n of this.children.get(host) ?? []) this.forget(`${host}/${n}`);
    this.children.delete(host);
    this.upper.delete(host);
    // A whiteout hides the disk's entry; where the disk shows none, nothing needs hiding.
    if (this.get(host) === 'disk') this.put(host, null);
    else this.children.get(path.dirname(host))?.delete(path.basename(host));
  }

  private forget(host: string): void {
    for (const n of this.children.get(host) ?? []) this.forget(`${host}/${n}`);
    this.children.delete(host);
    this.upper.delete(host);
  }

  private index(host: string): void {
    const dir = path.dirname(host);
    if (host === this.root) return;
    (this.children.get(dir) ?? this.children.set(dir, new Set()).get(dir)!).add(path.basename(host));
  }

  private mustBeAbsent(host: string, call: string): void {
    if (this.get(host) !== null) throw errno('EEXIST', call, host);
  }

  private open(fd: number): Inode {
    const node = this.fds.get(fd);
    if (node === undefined) throw errno('EBADF', 'write', String(fd));
    return node;
  }

  private inode(kind: Kind, mode: number, more: Partial<Inode> = {}): Inode {
    const uid = process.geteuid?.() ?? 0;
    const gid = process.getegid?.() ?? 0;
    return { kind, ino: this.nextIno++, dev: OVERLAY_DEV, nlink: kind === 'dir' ? 2 : 1, mode, uid, gid, size: 0, mtimeMs: Date.now(), opaque: false, chunks: null, xattrs: [], ...more };
  }
}

type Kind = 'file' | 'dir' | 'symlink' | 'fifo';

interface Inode {
  kind: Kind;
  ino: number;
  dev: number;
  nlink: number;
  /** Permission bits (the type is `kind`). */
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtimeMs: number;
  /** A directory made in the layer: the disk's entries below it do not show. */
  opaque: boolean;
  /** A file's bytes while they are kept (null: not kept, or the disk's). */
  chunks: Buffer[] | null;
  hash?: Hash;
  sha256?: string;
  target?: string;
  /** null: the disk entry's (see `disk`). */
  xattrs: Xattrs | null;
  /** The disk entry this one was copied up from (its content and attributes). */
  disk?: string;
}

/** A device number no disk has: inode numbers made here never equal one on disk. */
const OVERLAY_DEV = -1;

const TYPE_BITS: Record<Kind, number> = { file: fs.constants.S_IFREG, dir: fs.constants.S_IFDIR, symlink: fs.constants.S_IFLNK, fifo: fs.constants.S_IFIFO };

function statsOf(n: Inode): fs.Stats {
  const t = new Date(n.mtimeMs);
  const fields = {
    dev: n.dev, ino: n.ino, mode: TYPE_BITS[n.kind] | n.mode, nlink: n.nlink, uid: n.uid, gid: n.gid, rdev: 0, size: n.size, blksize: 4096, blocks: Math.ceil(n.size / 512),
    atimeMs: n.mtimeMs, mtimeMs: n.mtimeMs, ctimeMs: n.mtimeMs, birthtimeMs: n.mtimeMs, atime: t, mtime: t, ctime: t, birthtime: t,
  };
  return Object.assign(Object.create(fs.Stats.prototype) as fs.Stats, fields);
}

function setOwner(n: Inode, uid: number, gid: number): void {
  if (uid !== -1) n.uid = uid;
  if (gid !== -1) n.gid = gid;
}

function errno(code: string, call: string, host: string, why?: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${why ?? code}, ${call} '${host}'`), { code, syscall: call, path: host });
}
