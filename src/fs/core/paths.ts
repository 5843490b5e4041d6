import { StagedrootError } from '../../errors.js';
import { bytesOfName, nameFromBytes } from './names.js';

const SURROGATE = /[\ud800-\udfff]/;

/**
 * A tree path as stagedroot records it (journals, shared ops): relative to the root, no
 * empty, `.` or `..` component. Unlike a source's path (splitSourcePath), nothing is
 * normalised: a recorded path in another shape was not written by stagedroot.
 */
export function isTreePath(p: string): boolean {
  return p.length > 0 && !p.startsWith('/') && !p.includes('\0') && p.split('/').every((c) => c !== '' && c !== '.' && c !== '..');
}

export const TREE_PATH_RULE = 'a relative tree path without empty, . or .. components';

/**
 * Splits a path from a source into components, relative to the root. Leading slashes
 * (any number: "////etc/passwd") are stripped: every path is inside the root.
 * `.` and empty components are dropped. `..` is rejected here (defence one); the
 * resolver clamps at the root as chroot does (defence two). Backslashes are refused
 * in documents (specs, Ignition) but, with `allowBackslash`, are ordinary bytes of a
 * Linux file name: systemd's escaped unit names (`system-systemd\x2dfsck.slice`) ship
 * in real OS trees, and archive sources check the Windows-shaped ones themselves.
 */
export function splitSourcePath(p: string, what = 'path', opts: { allowBackslash?: boolean } = {}): string[] {
  if (typeof p !== 'string' || p.length === 0) {
    throw new StagedrootError('PATH_ESCAPE', `Empty ${what}`, { path: String(p) });
  }
  if (p.includes('\0')) {
    throw new StagedrootError('PATH_ESCAPE', `The ${what} ${JSON.stringify(p)} contains a NUL byte`, { path: p });
  }
  if (SURROGATE.test(p) && nameFromBytes(bytesOfName(p)) !== p) {
    throw new StagedrootError('NAME_UNREPRESENTABLE', `The ${what} ${JSON.stringify(p)} cannot be kept byte for byte: it holds a lone UTF-16 surrogate, or escaped bytes that are themselves valid UTF-8`, { path: p });
  }
  if (!opts.allowBackslash && p.includes('\\')) {
    throw new StagedrootError('PATH_ESCAPE', `The ${what} ${JSON.stringify(p)} contains a backslash`, { path: p });
  }
  const parts = p.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..')) {
    throw new StagedrootError('PATH_ESCAPE', `The ${what} ${JSON.stringify(p)} contains ".." and could leave the root`, { path: p });
  }
  if (parts.length === 0) {
    throw new StagedrootError('PATH_ESCAPE', `The ${what} ${JSON.stringify(p)} names the root itself`, { path: p });
  }
  return parts;
}

/** The canonical tree-relative form of a source path: "etc/foo" (no leading slash). */
export function normalizeTreePath(p: string, what = 'path'): string {
  return splitSourcePath(p, what).join('/');
}

/**
 * Orders tree paths the way a depth-first walk with sorted children visits them:
 * component by component, a parent before its children. Manifests are written and
 * merged in this order, so two of them can be compared in one streaming pass.
 */
export function comparePaths(a: string, b: string): number {
  if (a === b) return 0;
  // Equivalent to comparing the components one by one (a shorter component, or a
  // parent, first): at the first differing code unit, the end of a component ("/")
  // sorts before any other character. No arrays: this runs once or twice per entry.
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      if (x === SLASH) return -1;
      if (y === SLASH) return 1;
      return x < y ? -1 : 1;
    }
  }
  return a.length < b.length ? -1 : 1;
}

const SLASH = 0x2f;

/** True when `p` is `prefix` or below it. */
export function isUnder(p: string, prefix: string): boolean {
  return p === prefix || p.startsWith(prefix + '/');
}

/** True when `p` is one of `set`'s paths or below one (a removed path's subtree): a lookup per ancestor, not a scan of the set. */
export function isUnderAny(p: string, set: ReadonlySet<string>): boolean {
  if (set.size === 0) return false;
  for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) if (set.has(p.slice(0, i))) return true;
  return set.has(p);
}

/** Depth limit for any source path (an absurdly deep path is a bomb). */
export const MAX_PATH_DEPTH = 256;
