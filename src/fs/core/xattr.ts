import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { constants as osConstants } from 'node:os';
import { StagedrootError } from '../../errors.js';
import { runOnPath } from './path-tool.js';

/**
 * Extended attributes (file capabilities, SELinux labels, ACLs, trusted.* and user.*).
 * Every xattr syscall of stagedroot is here. The native calls come from @napi-rs/xattr
 * (prebuilt, the l*xattr family: a symlink's own attributes, never its target's). Its
 * paths are strings, so a path that is not UTF-8 (a Buffer) goes through getfattr /
 * setfattr from Debian's `attr` package, the bytes handed over by printf(1), never
 * through the UTF-8 conversion that would lose them.
 */

type Napi = typeof import('@napi-rs/xattr');
let napiModule: Napi | undefined;
/**
 * The native module, loaded by the first xattr call (a verb that reads no attribute does
 * not load it). On glibc x86-64, the machines stagedroot runs on, the prebuilt binary is
 * loaded directly: @napi-rs/xattr's index.js first reads /usr/bin/ldd to tell musl from
 * glibc, tries a .node file beside itself that npm does not install, then reads the
 * binary package's package.json for its version (~190 ms of a live apply's merge step
 * under TCG, profiled). Anywhere else, or when that binary is not installed beside it
 * (or is not loadable: a musl system), the package's own loader picks.
 */
function napiXattr(): Napi {
  if (napiModule) return napiModule;
  const require = createRequire(import.meta.url);
  if (process.platform === 'linux' && process.arch === 'x64') {
    try {
      return (napiModule = require('@napi-rs/xattr-linux-x64-gnu/xattr.linux-x64-gnu.node') as Napi);
    } catch {
      // the package's loader below
    }
  }
  return (napiModule = require('@napi-rs/xattr') as Napi);
}

/** Attributes as a change set carries them: [name, value] pairs. */
export type XattrList = ReadonlyArray<readonly [string, Uint8Array]>;

/** A tree entry's attributes: [name, value] pairs sorted by name. */
export type Xattrs = [string, Buffer][];

/** A list of attributes as Buffers in name order, the order they are written and recorded in. */
export function sortedXattrs(list: XattrList): Xattrs {
  const out: Xattrs = list.map(([n, v]) => [n, Buffer.from(v.buffer, v.byteOffset, v.byteLength)]);
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** What to do with an attribute the target filesystem refuses (EOPNOTSUPP, or EPERM for trusted.*). */
export type XattrPolicy = 'strict' | 'drop';

export interface XattrWriteOptions {
  /** Tree path for messages. */
  rel: string;
  policy?: XattrPolicy;
  /** Called for each attribute dropped under the 'drop' policy. */
  onDrop?: (rel: string, name: string, why: string) => void;
}

// Built at the first error: node:os is not loaded by a CLI start that reads no attribute.
let errnoNames: Map<number, string> | undefined;

/** The errno name of a @napi-rs/xattr error ("… (os error 95)"), or of a Node error. */
function errnoOfXattr(err: unknown): string | undefined {
  const m = /os error (\d+)/.exec((err as Error)?.message ?? '');
  if (m) return (errnoNames ??= new Map<number, string>(Object.entries(osConstants.errno).map(([k, v]) => [v, k]))).get(Number(m[1]));
  return (err as NodeJS.ErrnoException)?.code;
}

const UNSUPPORTED = new Set(['ENOTSUP', 'EOPNOTSUPP']);

/**
 * A Buffer path that is UTF-8 as a string, for the native calls: only a path that is not
 * goes through getfattr/setfattr (the `attr` package, absent from a minimal Debian).
 */
function nativePath(host: string | Buffer): string | Buffer {
  if (typeof host === 'string') return host;
  const s = host.toString('utf8');
  return Buffer.byteLength(s) === host.length && Buffer.from(s, 'utf8').equals(host) ? s : host;
}

/** Names of the attributes of an entry (not following a symlink); [] where the filesystem has none. */
export function listXattrNames(given: string | Buffer): string[] {
  const host = nativePath(given);
  if (typeof host !== 'string') return readXattrsByTool(host).map(([n]) => n);
  try {
    return napiXattr().listAttributesSync(host);
  } catch (err) {
    const e = errnoOfXattr(err);
    if (e !== undefined && UNSUPPORTED.has(e)) return [];
    throw xattrIoError(err, host, 'list', undefined);
  }
}

/** An entry's attributes with their values, sorted by name; [] when it has none. */
export function readXattrs(given: string | Buffer): Xattrs {
  const host = nativePath(given);
  if (typeof host !== 'string') return readXattrsByTool(host);
  const names = listXattrNames(host);
  if (names.length === 0) return [];
  const out: Xattrs = [];
  for (const n of names.sort()) {
    let v: Buffer | null;
    try {
      v = napiXattr().getAttributeSync(host, n);
    } catch (err) {
      throw xattrIoError(err, host, 'read', n);
    }
    if (v !== null) out.push([n, v]);
  }
  return out;
}

/**
 * Sets attributes on an entry (not following a symlink). Call it after chown (which
 * clears security.capability) and after the content is written. An attribute the
 * filesystem refuses is an XATTR_UNSUPPORTED error naming it and the path, or, with
 * policy 'drop', reported through onDrop and skipped.
 */
export function writeXattrs(given: string | Buffer, attrs: Xattrs, o: XattrWriteOptions): Xattrs {
  const host = nativePath(given);
  const kept: Xattrs = [];
  for (const [name, value] of attrs) {
    try {
      if (typeof host === 'string') napiXattr().setAttributeSync(host, name, value);
      else writeXattrByTool(host, name, value);
    } catch (err) {
      const e = errnoOfXattr(err);
      const refused = e !== undefined && (UNSUPPORTED.has(e) || (e === 'EPERM' && name.startsWith('trusted.')));
      if (refused && o.policy === 'drop') {
        o.onDrop?.(o.rel, name, `${e}: the filesystem does not take it`);
        continue;
      }
      if (refused) {
        throw new StagedrootError('XATTR_UNSUPPORTED', `Cannot keep the extended attribute ${name} of ${o.rel}: the filesystem refuses it (${e}); ask to drop such attributes with a warning (--drop-unsupported-xattrs)`, { path: o.rel, resolvedPath: String(host), errno: e, value: name, cause: err });
      }
      throw xattrIoError(err, host, 'write', name, o.rel);
    }
    kept.push([name, value]);
  }
  return kept;
}

/** Removes the named attributes (missing ones are fine). */
export function removeXattrs(given: string | Buffer, names: string[], rel: string): void {
  const host = nativePath(given);
  for (const n of names) {
    try {
      if (typeof host === 'string') napiXattr().removeAttributeSync(host, n);
      else runOnPath(host, ['setfattr', '-h', '-x', n, '--'], rel);
    } catch (err) {
      if (errnoOfXattr(err) === 'ENODATA') continue;
      throw xattrIoError(err, host, 'remove', n, rel);
    }
  }
}

/** Makes an entry's attributes exactly `attrs`: others removed, these set. */
export function replaceXattrs(host: string | Buffer, attrs: Xattrs, o: XattrWriteOptions): Xattrs {
  const keep = new Set(attrs.map(([n]) => n));
  const extra = listXattrNames(host).filter((n) => !keep.has(n));
  if (extra.length > 0) removeXattrs(host, extra, o.rel);
  return writeXattrs(host, attrs, o);
}

/**
 * The manifest's record of an entry's attributes: the first 128 bits of a sha256 over
 * the sorted name/value pairs (each name, a NUL, the value's length and the value), or
 * undefined when it has none.
 */
export function xattrDigest(attrs: Xattrs): string | undefined {
  if (attrs.length === 0) return undefined;
  const h = createHash('sha256');
  const len = Buffer.alloc(4);
  for (const [n, v] of attrs) {
    h.update(n, 'utf8');
    h.update('\0');
    len.writeUInt32BE(v.length);
    h.update(len);
    h.update(v);
  }
  return h.digest('hex').slice(0, 32);
}

/** True when the filesystem holding `host` has extended attributes at all (one probe per tree). */
export function xattrsSupported(host: string): boolean {
  try {
    napiXattr().listAttributesSync(host);
    return true;
  } catch (err) {
    const e = errnoOfXattr(err);
    if (e !== undefined && UNSUPPORTED.has(e)) return false;
    throw xattrIoError(err, host, 'list', undefined);
  }
}

function xattrIoError(err: unknown, host: string | Buffer, what: string, name: string | undefined, rel?: string): StagedrootError {
  if (err instanceof StagedrootError) return err;
  const e = errnoOfXattr(err);
  const code = e === 'ENOSPC' || e === 'EDQUOT' ? 'NO_SPACE' : 'IO';
  const p = rel ?? String(host);
  return new StagedrootError(code, `Cannot ${what} the extended attribute${name ? ` ${name}` : 's'} of ${p}: ${(err as Error)?.message ?? String(err)}`, { path: p, resolvedPath: String(host), errno: e, value: name, cause: err });
}

// ------------------------------------------------------------ paths that are not UTF-8


function readXattrsByTool(host: Buffer): Xattrs {
  let out: string;
  try {
    out = runOnPath(host, ['getfattr', '-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', '--'], String(host));
  } catch (err) {
    const e = errnoOfXattr(err);
    if (e !== undefined && UNSUPPORTED.has(e)) return [];
    throw xattrIoError(err, host, 'read', undefined);
  }
  const attrs: Xattrs = [];
  for (const line of out.split('\n')) {
    const m = /^([^#=][^=]*)=0x([0-9a-f]*)$/.exec(line);
    if (m) attrs.push([m[1]!, Buffer.from(m[2]!, 'hex')]);
  }
  return attrs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

function writeXattrByTool(host: Buffer, name: string, value: Buffer): void {
  runOnPath(host, ['setfattr', '-h', '-n', name, '-v', '0x' + value.toString('hex'), '--'], String(host));
}
