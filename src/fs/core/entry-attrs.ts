import * as fs from 'node:fs';

/** Only root can give an entry another owner; anyone else's copies and writes keep their own. */
export const CAN_CHOWN = typeof process.getuid === 'function' && process.getuid() === 0;

/**
 * A stat time as utimes takes it, such that the copy's time truncated to the millisecond
 * (what a manifest records) is the source's: utimes goes through float seconds, which
 * may land a nanosecond below a whole millisecond (…396 ms → …395.999999), so the time
 * is given half a microsecond past it, which libuv's truncation to microseconds drops
 * again: the copy gets the whole millisecond exactly. Before 1970 the Date itself, as
 * Node turns a negative number into "now".
 */
export function utime(ms: number): number | Date {
  return ms >= 0 ? (Math.trunc(ms) + 0.0005) / 1000 : new Date(Math.round(ms));
}

/** The system calls that set an entry's attributes (the host's, or a tree's I/O layer). */
export interface AttrCalls {
  lchown(host: string | Buffer, uid: number, gid: number): void;
  chmod(host: string | Buffer, mode: number): void;
  utimes(host: string | Buffer, atime: number | Date, mtime: number | Date): void;
}

export const hostAttrCalls: AttrCalls = {
  lchown: (host, uid, gid) => fs.lchownSync(host, uid, gid),
  chmod: (host, mode) => fs.chmodSync(host, mode),
  utimes: (host, a, m) => fs.utimesSync(host, a, m),
};

/** The same calls on an open file (a copy's own descriptor: no path to resolve again). */
export const fdAttrCalls = (fd: number): AttrCalls => ({
  lchown: (_h, uid, gid) => fs.fchownSync(fd, uid, gid),
  chmod: (_h, mode) => fs.fchmodSync(fd, mode),
  utimes: (_h, a, m) => fs.futimesSync(fd, a, m),
});

export interface EntryAttrs {
  uid?: number;
  gid?: number;
  /** Permission bits (the type bits are dropped). */
  mode?: number;
  /** Seconds (or a Date), as utimes takes it: see utime(). */
  mtime?: number | Date;
  /** The same; the mtime when not given. */
  atime?: number | Date;
}

/**
 * An entry's attributes, in the one order that keeps them all: the owner first (a chown
 * clears set-id bits and security.capability), then the extended attributes (`xattrs`,
 * the caller's: a label, a capability, ACLs), then the mode, then the times (last: the
 * other calls do not change them, but a write into the entry would). A symlink gets its
 * owner and extended attributes only: it has no mode, and its times are not kept.
 */
export function applyAttrs<T>(calls: AttrCalls, host: string | Buffer, a: EntryAttrs, o: { symlink?: boolean; xattrs?: () => T } = {}): T | undefined {
  if (CAN_CHOWN && (a.uid !== undefined || a.gid !== undefined)) calls.lchown(host, a.uid ?? -1, a.gid ?? -1);
  const x = o.xattrs?.();
  if (o.symlink) return x;
  if (a.mode !== undefined) calls.chmod(host, a.mode & 0o7777);
  if (a.mtime !== undefined) calls.utimes(host, a.atime ?? a.mtime, a.mtime);
  return x;
}

/** A source entry's attributes as a copy takes them (owner, mode, times to the millisecond). */
export function attrsOfStat(st: fs.Stats): EntryAttrs {
  return { uid: st.uid, gid: st.gid, mode: st.mode & 0o7777, atime: utime(st.atimeMs), mtime: utime(st.mtimeMs) };
}
