import { StagedrootError } from '../errors.js';
import type { XattrList } from '../fs/core/xattr.js';

/**
 * One line of a stored layer's index (`index.ndjson`), JSON. The lines are the layer's
 * checked entries in archive order, then each directory's final attributes: what
 * layer/plan.ts turns into the ops of a fresh apply, with a file's content replaced by
 * the store object it is (`k`). Whiteouts and opaque markers are recorded as they are,
 * never applied to anything at import: they apply to the lower layers of whatever stack
 * the layer is linked in.
 *
 * - `d` a directory (mode, owner, extended attributes; its mtime comes with its `a` line)
 * - `f` a regular file: the object `k` (content, mode, owner, mtime, xattrs), `s` bytes,
 *   `h` its content's sha256 (hex), the object's attributes again (`m`, `u`, `g`, `mt`,
 *   `x`: what a copy or a write elsewhere gives the file), `l` when it carries an SELinux
 *   label of its own
 * - `l` a symlink to `to`; `h` a hardlink to `to`, a file earlier in the layer
 * - `w` a whiteout of the lower layers' `p`; `o` the directory `p` is opaque
 * - `a` a directory's final mode and mtime (set after its children, deepest first)
 *
 * Paths are tree paths (a name that is not UTF-8 escaped, fs/core/names.ts), extended
 * attribute values base64.
 */
export type IndexLine =
  | { t: 'd'; p: string; m?: number; u?: number; g?: number; x?: [string, string][] }
  | { t: 'f'; p: string; k: string; s: number; h: string; m: number; u?: number; g?: number; mt?: number; x?: [string, string][]; l?: 1 }
  | { t: 'l'; p: string; to: string; u?: number; g?: number; x?: [string, string][] }
  | { t: 'h'; p: string; to: string }
  | { t: 'w'; p: string }
  | { t: 'o'; p: string }
  | { t: 'a'; p: string; m: number; mt?: number };

export function encodeXattrs(x: XattrList | undefined): [string, string][] | undefined {
  if (x === undefined || x.length === 0) return undefined;
  return x.map(([n, v]) => [n, Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')]);
}

export function decodeXattrs(x: [string, string][] | undefined): [string, Buffer][] | undefined {
  return x?.map(([n, v]) => [n, Buffer.from(v, 'base64')]);
}

export function parseIndexLine(line: string, file: string): IndexLine {
  try {
    const v = JSON.parse(line) as IndexLine;
    if (typeof v === 'object' && v !== null && typeof v.t === 'string' && typeof v.p === 'string') return v;
  } catch {
    // reported below
  }
  throw new StagedrootError('STATE_CORRUPT', `The layer index ${file} has a line that is not an index entry: ${JSON.stringify(line.slice(0, 200))}`, { path: file });
}
