import { StagedrootError } from '../../errors.js';
import { MAX_PATH_DEPTH } from '../../fs/core/paths.js';

/**
 * Checks on one path or link target of a layer, before anything is written. These are
 * the first defence; RootFs's chroot-style resolution is the second (whatever passes
 * here is still resolved inside the tree, `..` clamped at its root, O_NOFOLLOW last).
 *
 * Decisions, each covered by test/sources/layer/hostile.test.ts:
 * - Leading slashes are stripped (`////etc/passwd` is the tree's etc/passwd): a layer
 *   describes a root tree, so an absolute name can only mean a path inside it.
 * - `..` anywhere is refused, even where it would stay inside (node-tar does the same).
 * - Backslashes are ordinary bytes of a Linux name (systemd ships `\x2d` unit names),
 *   but a name that Windows tools would read differently is refused: a leading `\`,
 *   a `..` between backslashes, a drive (`C:`, `C:../x`) or UNC (`\\host`) prefix.
 * - Case and Unicode normalisation: Linux names are bytes, so `A` and `a`, or NFC and
 *   NFD `é`, are different names and may both exist. What is refused is going through
 *   a symlink of this layer, and that check folds case and normalisation (see
 *   foldPath), so a collision on a case-insensitive or normalising filesystem cannot
 *   sneak a write through a link either.
 * - Symlink targets are stored as given and only ever followed inside the tree.
 *   Absolute targets are normal (`etc/localtime -> /usr/share/zoneinfo/UTC`); a
 *   relative one that climbs above the root is refused: it means one thing inside a
 *   chroot and another outside it.
 * - Hardlink targets must be archive paths of a regular file earlier in the same
 *   layer; an absolute or `..` target is refused (link(2) does not clamp anything).
 */

export interface LayerLimits {
  /** Cap on the decompressed archive (and on the declared sizes of all its files). */
  maxBytes: number;
  /** Cap on the number of entries (headers, including extended ones). */
  maxEntries: number;
}

export const DEFAULT_LAYER_LIMITS: LayerLimits = {
  maxBytes: 64 * 1024 ** 3,
  maxEntries: 1_000_000,
};

/** PATH_MAX and NAME_MAX on Linux: a longer name cannot be created, so it is refused up front. */
export const MAX_PATH_BYTES = 4096;
export const MAX_NAME_BYTES = 255;

/** How a raw name is shown in messages: quoted, control characters escaped, long ones cut. */
export function show(raw: unknown): string {
  if (typeof raw !== 'string') return `(${typeof raw} ${String(raw)})`;
  return raw.length > 200 ? `${JSON.stringify(raw.slice(0, 200))}… (${raw.length} characters)` : JSON.stringify(raw);
}

function fail(code: 'PATH_ESCAPE' | 'UNSAFE_ENTRY' | 'SOURCE_CORRUPT', raw: unknown, why: string): never {
  const name = typeof raw === 'string' ? raw : String(raw);
  throw new StagedrootError(code, `The entry ${show(raw)} ${why}`, { path: name });
}

/** True for names Windows tools would resolve differently (drive, UNC, `..` between backslashes). */
function windowsShaped(s: string): boolean {
  if (/^[A-Za-z]:/.test(s) || s.startsWith('\\')) return true;
  return s.split(/[\\/]/).some((c) => c === '..');
}

function checkText(raw: unknown, what: string): string {
  if (typeof raw !== 'string') fail('SOURCE_CORRUPT', raw, `has a ${what} that is not text`);
  if (raw.includes('\0')) fail('PATH_ESCAPE', raw, `has a ${what} containing a NUL byte`);
  if (Buffer.byteLength(raw) > MAX_PATH_BYTES) fail('UNSAFE_ENTRY', raw, `has a ${what} longer than ${MAX_PATH_BYTES} bytes`);
  return raw;
}

/**
 * The tree-relative form of an entry path ("etc/motd"; "" for the root itself), or a
 * StagedrootError naming the entry.
 */
export function checkEntryPath(raw: unknown): string {
  const p = checkText(raw, 'path');
  if (windowsShaped(p)) {
    if (p.split(/[\\/]/).includes('..')) fail('PATH_ESCAPE', raw, 'contains ".." and could leave the root');
    fail('PATH_ESCAPE', raw, 'is a Windows drive, UNC or backslash-rooted path');
  }
  const parts = p.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.length > MAX_PATH_DEPTH) fail('UNSAFE_ENTRY', raw, `is ${parts.length} components deep (limit ${MAX_PATH_DEPTH})`);
  for (const c of parts) {
    if (Buffer.byteLength(c) > MAX_NAME_BYTES) fail('UNSAFE_ENTRY', raw, `has a component longer than ${MAX_NAME_BYTES} bytes`);
  }
  return parts.join('/');
}

/** Checks a symlink target stored at `at` (a checked tree path). Returns it unchanged. */
export function checkSymlinkTarget(raw: unknown, at: string): string {
  const t = checkText(raw, 'symlink target');
  if (t === '') fail('SOURCE_CORRUPT', at, 'is a symlink with an empty target');
  if (/^[A-Za-z]:/.test(t) || t.startsWith('\\') || (t.includes('\\') && t.split(/[\\/]/).includes('..'))) {
    fail('PATH_ESCAPE', at, `is a symlink to ${show(t)}, a Windows-style path`);
  }
  if (t.startsWith('/')) return t;
  // Climbs from the link's directory; above the root means outside a tree that is not chrooted.
  let depth = at.split('/').length - 1;
  for (const c of t.split('/')) {
    if (c === '' || c === '.') continue;
    depth += c === '..' ? -1 : 1;
    if (depth < 0) fail('PATH_ESCAPE', at, `is a symlink to ${show(t)}, which climbs above the root`);
  }
  return t;
}

/** Checks a hardlink target: an archive path, never absolute or with `..`. Returns its tree form. */
export function checkHardlinkTarget(raw: unknown, at: string): string {
  const t = checkText(raw, 'hardlink target');
  if (t.startsWith('/')) fail('PATH_ESCAPE', at, `is a hardlink to the absolute path ${show(t)}`);
  if (windowsShaped(t)) fail('PATH_ESCAPE', at, `is a hardlink to ${show(t)}, which could leave the root`);
  const p = checkEntryPath(t);
  if (p === '') fail('PATH_ESCAPE', at, 'is a hardlink to the root itself');
  return p;
}

/** A key under which two names that some filesystem may treat as one collide. */
export function foldPath(p: string): string {
  return p.normalize('NFC').toLowerCase();
}

export function checkId(raw: number | undefined, what: 'uid' | 'gid', at: string): number | undefined {
  if (raw === undefined) return undefined;
  if (!Number.isSafeInteger(raw) || raw < 0 || raw > 0xfffffffe) fail('SOURCE_CORRUPT', at, `has an invalid ${what} ${raw}`);
  return raw;
}
