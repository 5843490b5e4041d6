import { StagedrootError } from '../errors.js';

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
  const pa = a.split('/');
  const pb = b.split('/');
  const n = Math.min(pa.length, pb.length);
  for (let i = 0; i < n; i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

/** True when `p` is `prefix` or below it. */
export function isUnder(p: string, prefix: string): boolean {
  return p === prefix || p.startsWith(prefix + '/');
}

/** Depth limit for any source path (an absurdly deep path is a bomb). */
export const MAX_PATH_DEPTH = 256;
