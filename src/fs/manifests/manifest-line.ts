import * as fs from 'node:fs';
import { z } from 'zod';
import { StagedrootError, fieldPath } from '../../errors.js';

/**
 * The manifest line codec: the one place that knows how an entry is written as a line
 * and read back, and the cheap peeks (a line's path, a file's size) that readers use to
 * pass over lines without parsing them. ManifestWriter, ManifestReader, ManifestCursor,
 * ManifestIndex, the copy, the copy's split points and the snapshot manifest all go
 * through it, so the format is spelled out once.
 *
 * A line is JSON.stringify of an entry with its keys in schema order (formatEntry):
 * `{"p":…,"t":…,"m":…,"u":…,"g":…[,"s":…,"h":…][,"l":…][,"mt":…,"i":…,"c":…][,"x":…]}`.
 * Lines written before a key existed (`x`; `i` and `c`) still parse.
 */
/** One entry of a manifest (see the module comment of manifest.ts). */
export const manifestEntrySchema = z
  .object({
    p: z.string().min(1), // tree-relative path
    t: z.enum(['f', 'd', 'l', 'o']), // file, directory, symlink, other
    m: z.number().int().min(0).max(0o7777), // permission bits
    u: z.number().int().min(0),
    g: z.number().int().min(0),
    s: z.number().int().min(0).optional(), // size of a regular file
    h: z.string().regex(/^[0-9a-f]{64}$/).optional(), // sha256 of a regular file
    l: z.string().optional(), // symlink target
    mt: z.number().int().optional(), // mtime in ms (with i and c, a cache key for re-hashing; not compared)
    i: z.number().int().min(0).optional(), // inode number of a regular file (cache key only)
    c: z.number().int().optional(), // ctime in µs of a regular file (cache key only: no user can set it)
    x: z.string().regex(/^[0-9a-f]{32}$/).optional(), // digest of the extended attributes (see xattrDigest); absent: none
  })
  .strict();

export type ManifestEntry = z.infer<typeof manifestEntrySchema>;

const ENTRY_KEYS = new Set(Object.keys(manifestEntrySchema.shape));
/** A placeholder hash, where a line's own one is compared by shape only. */
const ANY_HASH = '0'.repeat(64);
const HASH_RE = /^[0-9a-f]{64}$/;
const XATTR_RE = /^[0-9a-f]{32}$/;
const isNat = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

/**
 * manifestEntrySchema's checks written out by hand: zod costs several microseconds a
 * line, a large share of staging a big tree, and every stage reads a whole manifest
 * twice. Returns the entry (a new object, keys in schema order, as zod returns it) only
 * when zod would accept the line; otherwise null, and zod decides and words the error.
 */
export function checkEntry(raw: unknown): ManifestEntry | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const o = raw as Record<string, unknown>;
  for (const k in o) if (!ENTRY_KEYS.has(k)) return null;
  const { p, t, m, u, g, s, h, l, mt, i, c, x } = o;
  if (typeof p !== 'string' || p.length === 0) return null;
  if (t !== 'f' && t !== 'd' && t !== 'l' && t !== 'o') return null;
  if (!isNat(m) || m > 0o7777 || !isNat(u) || !isNat(g)) return null;
  const e: ManifestEntry = { p, t, m, u, g };
  if (s !== undefined) {
    if (!isNat(s)) return null;
    e.s = s;
  }
  if (h !== undefined) {
    if (typeof h !== 'string' || !HASH_RE.test(h)) return null;
    e.h = h;
  }
  if (l !== undefined) {
    if (typeof l !== 'string') return null;
    e.l = l;
  }
  if (mt !== undefined) {
    if (typeof mt !== 'number' || !Number.isInteger(mt)) return null;
    e.mt = mt;
  }
  if (i !== undefined) {
    if (!isNat(i)) return null;
    e.i = i;
  }
  if (c !== undefined) {
    if (typeof c !== 'number' || !Number.isInteger(c)) return null;
    e.c = c;
  }
  if (x !== undefined) {
    if (typeof x !== 'string' || !XATTR_RE.test(x)) return null;
    e.x = x;
  }
  return e;
}

/** The line of an entry, as ManifestWriter writes it. */
export function formatEntry(e: ManifestEntry): string {
  return JSON.stringify(e);
}

/** Parses and checks one manifest line; `where` names it in the error ("line 12"). */
export function parseManifestLine(line: string, file: string, where: string): ManifestEntry {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (err) {
    throw new StagedrootError('STATE_CORRUPT', `Manifest ${file} ${where} is not JSON`, { path: file, cause: err });
  }
  const fast = checkEntry(raw);
  if (fast !== null) return fast;
  const r = manifestEntrySchema.safeParse(raw);
  if (!r.success) {
    throw new StagedrootError('STATE_CORRUPT', `Manifest ${file} ${where} is invalid: ${r.error.issues.map((i) => `${fieldPath(i.path) || '(root)'}: ${i.message}`).join('; ')}`, { path: file });
  }
  return r.data;
}

/** A stat's ctime in whole microseconds, as a manifest records it. */
export function ctimeUs(st: fs.Stats): number {
  return Math.round(st.ctimeMs * 1000);
}

/**
 * The path of a line as ManifestWriter writes it (`{"p":"…",…`), without JSON.parse;
 * null when the line has another shape, escapes in its path or a second "p" key (then
 * JSON.parse decides).
 */
export function cheapPath(line: string): string | null {
  if (!line.startsWith('{"p":"')) return null;
  const end = line.indexOf('"', 6);
  if (end === -1) return null;
  const p = line.slice(6, end);
  if (p.includes('\\') || line.indexOf('"p":', end) !== -1) return null;
  return p;
}

/**
 * True when `line` is exactly the line ManifestWriter writes for the regular file `rel`
 * with stat `st` (inode and ctime included, see unchangedSince), some valid hash, and
 * the attribute digest `x` (undefined: none): the unchanged file's line can be reused whole.
 */
export function isFileLineFor(line: string, rel: string, st: fs.Stats, x: string | undefined = undefined): boolean {
  const want = formatEntry({ p: rel, t: 'f', m: st.mode & 0o7777, u: st.uid, g: st.gid, s: st.size, h: ANY_HASH, mt: Math.trunc(st.mtimeMs), i: st.ino, c: ctimeUs(st), ...(x === undefined ? {} : { x }) });
  // The path is escaped JSON: the first `"h":"` is the hash's key.
  const at = want.indexOf('"h":"') + 5;
  return line.length === want.length && line.startsWith(want.slice(0, at)) && line.endsWith(want.slice(at + 64)) && HASH_RE.test(line.slice(at, at + 64));
}

/** The size recorded in a file's line, read without a parse (0 for other entries). */
export function lineSize(line: string): number {
  const i = line.indexOf(',"s":');
  if (i === -1) return 0;
  return Number.parseInt(line.slice(i + 5, i + 25), 10) || 0;
}

/** Lines as bytes (ManifestCursor): how a line starts, and the key of a file's size. */
export const LINE_HEAD = Buffer.from('{"p":"');
const SIZE_KEY = Buffer.from(',"s":');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The end of the path of the line in buf[at, lineEnd) when it is plain printable ASCII
 * with no escape (then the path is the bytes after LINE_HEAD up to it, comparable as
 * bytes); -1 otherwise (decode the line and use cheapPath or parseManifestLine).
 */
export function asciiPathEnd(b: Buffer, at: number, lineEnd: number): number {
  if (lineEnd - at < LINE_HEAD.length || b.compare(LINE_HEAD, 0, LINE_HEAD.length, at, at + LINE_HEAD.length) !== 0) return -1;
  for (let i = at + LINE_HEAD.length; i < lineEnd; i++) {
    const c = b[i]!;
    if (c === QUOTE) return i;
    if (c === BACKSLASH || c >= 0x7f || c < 0x20) return -1;
  }
  return -1;
}

/**
 * The sum of the sizes the lines in buf[from, to) record (0 for entries other than
 * files), as lineSize reads one: the digits after each `,"s":` key (which no JSON
 * string can hold unescaped).
 */
export function sumSizes(b: Buffer, from: number, to: number): number {
  let sum = 0;
  for (let i = b.indexOf(SIZE_KEY, from); i !== -1 && i < to; i = b.indexOf(SIZE_KEY, i + SIZE_KEY.length)) {
    let n = 0;
    for (let j = i + SIZE_KEY.length; j < to; j++) {
      const c = b[j]! - 0x30;
      if (c < 0 || c > 9) break;
      n = n * 10 + c;
    }
    sum += n;
  }
  return sum;
}
