import * as fs from 'node:fs';
import { StagedrootError, errnoOf } from '../../errors.js';
import { readLinkTarget } from '../manifests/manifest.js';
import { ioError } from '../core/io-error.js';
import { walk } from '../core/walk.js';
import { readXattrs, type Xattrs } from '../core/xattr.js';

export type TreeEntryKind = 'file' | 'dir' | 'symlink' | 'char-device' | 'block-device' | 'fifo' | 'socket';

/** One entry of a tree being read as a source, described by lstat (links are not followed). */
export interface TreeEntry {
  /** Path relative to the walked root ("etc/motd"). */
  rel: string;
  /** A Buffer when the path holds a name that is not UTF-8 (`rel` has its bytes escaped). */
  host: string | Buffer;
  kind: TreeEntryKind;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
  nlink: number;
  /** "dev:ino", to find hard links between entries. */
  inode: string;
  /** The stored target of a symlink. */
  linkTarget?: string;
  /** Its extended attributes, when it has any. */
  xattrs?: Xattrs;
}

function kindOf(st: fs.Stats): TreeEntryKind {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isCharacterDevice()) return 'char-device';
  if (st.isBlockDevice()) return 'block-device';
  if (st.isFIFO()) return 'fifo';
  return 'socket';
}

/**
 * Yields a tree's entries lazily, depth first with sorted children (a parent before its
 * children), never following symlinks, names kept as bytes. Only the names of the
 * directories on the current path are held, so memory follows depth × width, not the
 * size of the tree.
 */
export function* readTree(root: string): Generator<TreeEntry> {
  const rootSt = statOrThrow(root, root, true);
  if (!rootSt.isDirectory()) throw new StagedrootError('USAGE', `The source ${root} is not a directory`, { value: root });
  // The one walker (walk.ts); a directory it cannot read is an error naming it.
  for (const step of walk(root, { onReadError: (err, _rel, host) => ioError(err, String(host), String(host)) })) {
    if (step.leave) continue;
    const { rel, host } = step;
    const st = statOrThrow(host, rel, false);
    const kind = kindOf(st);
    const e: TreeEntry = {
      rel,
      host,
      kind,
      mode: st.mode & 0o7777,
      uid: st.uid,
      gid: st.gid,
      size: kind === 'file' ? st.size : 0,
      mtime: st.mtimeMs / 1000,
      nlink: st.nlink,
      inode: `${st.dev}:${st.ino}`,
    };
    if (kind === 'symlink') {
      try {
        e.linkTarget = readLinkTarget(host);
      } catch (err) {
        throw ioError(err, rel, String(host));
      }
    }
    const xattrs = readXattrs(host);
    if (xattrs.length > 0) e.xattrs = xattrs;
    // Walked into only when lstat agrees it is a directory (readdir's type could be stale).
    if (kind !== 'dir') step.skip();
    yield e;
  }
}

/**
 * Streams a regular file of a source tree. O_NOFOLLOW and an fstat check make sure
 * what is read is still the regular file the walk saw, not a symlink swapped in, and
 * a file that no longer has the size the checks counted is refused.
 */
export async function* readFileChunks(hostPath: string | Buffer, rel: string, expectedSize: number): AsyncGenerator<Buffer> {
  const host = String(hostPath); // for messages
  let fd: number;
  try {
    fd = fs.openSync(hostPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    if (errnoOf(err) === 'ELOOP') throw new StagedrootError('SOURCE_CORRUPT', `${rel} became a symbolic link while it was being staged`, { path: rel, resolvedPath: host });
    throw ioError(err, rel, host);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new StagedrootError('SOURCE_CORRUPT', `${rel} is no longer a regular file`, { path: rel, resolvedPath: host });
    const size = 256 * 1024;
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(size);
      const n = await new Promise<number>((resolve, reject) => fs.read(fd, buf, 0, size, null, (err, got) => (err ? reject(ioError(err, rel, host)) : resolve(got))));
      if (n === 0) break;
      total += n;
      if (total > expectedSize) break;
      yield n === size ? buf : buf.subarray(0, n);
    }
    if (total !== expectedSize) {
      throw new StagedrootError('SOURCE_CORRUPT', `${rel} changed size while it was being staged (${expectedSize} bytes when checked, ${total > expectedSize ? 'more' : total} now)`, { path: rel, resolvedPath: host });
    }
  } finally {
    fs.closeSync(fd);
  }
}

function statOrThrow(host: string | Buffer, rel: string, follow: boolean): fs.Stats {
  try {
    return follow ? fs.statSync(host) : fs.lstatSync(host);
  } catch (err) {
    throw ioError(err, rel, String(host));
  }
}
