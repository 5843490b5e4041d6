import { StagedrootError } from '../../errors.js';

/**
 * Validates a PAX extended header (`LEN KEY=VALUE\n` records) before node-tar's Pax
 * parser sees it. That parser is forgiving in ways an attacker can use to make two
 * tools see two different archives: it skips records whose length is wrong, cuts
 * values at the first NUL (`etc/passwd\0.txt` becomes `etc/passwd`), cannot parse a
 * value with a newline, ignores a negative `size` (falling back to the header's), and
 * accepts a non-POSIX `type` key that turns a file into a device. Each of those is
 * refused here, naming the entry the header belongs to as far as it is known.
 */
const DECIMAL = /^\d+$/;
const TIME = /^-?\d+(\.\d+)?$/;
const NUMERIC_KEYS = new Set(['size', 'uid', 'gid', 'mode', 'SCHILY.dev', 'SCHILY.ino', 'SCHILY.nlink', 'dev', 'ino', 'nlink']);
const TIME_KEYS = new Set(['mtime', 'atime', 'ctime']);

/**
 * `layer` names the archive, `entry` the entry the header belongs to (as far as it is
 * known). Returns the records' keys, in order.
 */
export function checkPaxRecords(raw: Buffer, layer: string, entry: string): string[] {
  const keys: string[] = [];
  const bad = (why: string, code: 'SOURCE_CORRUPT' | 'PATH_ESCAPE' | 'SOURCE_UNSUPPORTED' = 'SOURCE_CORRUPT'): never => {
    throw new StagedrootError(code, `${layer} is rejected: the PAX extended header for ${JSON.stringify(entry)} ${why}`, { path: entry });
  };
  let off = 0;
  while (off < raw.length) {
    if (raw.subarray(off).every((b) => b === 0)) return keys; // NUL padding some writers add
    const sp = raw.indexOf(0x20, off);
    const lenText = sp === -1 ? '' : raw.toString('latin1', off, sp);
    if (!DECIMAL.test(lenText)) bad(`has a malformed record at byte ${off}`);
    const len = Number(lenText);
    const end = off + len;
    if (end > raw.length || end <= sp + 1 || raw[end - 1] !== 0x0a) bad(`has a record at byte ${off} whose length (${len}) does not match its content`);
    const eqAt = raw.indexOf(0x3d, sp + 1);
    if (eqAt === -1 || eqAt >= end - 1 || eqAt === sp + 1) bad(`has a record at byte ${off} without a key`);
    if (xattrKey(raw.toString('utf8', sp + 1, eqAt)) !== null) {
      keys.push(raw.toString('utf8', sp + 1, eqAt));
      off = end; // a binary value: any byte, a newline or NUL included, is framed by the length
      continue;
    }
    const text = raw.toString('utf8', sp + 1, end - 1);
    const eq = text.indexOf('=');
    if (eq <= 0) bad(`has a record at byte ${off} without a key`);
    const key = text.slice(0, eq);
    const value = text.slice(eq + 1);
    keys.push(key);
    if (value.includes('\n')) bad(`has a ${key} value with a newline, which tar readers disagree on`, 'SOURCE_UNSUPPORTED');
    if ((key === 'path' || key === 'linkpath') && value.includes('\0')) bad(`has a ${key} containing a NUL byte: ${JSON.stringify(value)}`, 'PATH_ESCAPE');
    if (NUMERIC_KEYS.has(key) && !DECIMAL.test(value)) bad(`has ${key}=${JSON.stringify(value)}, not a non-negative decimal number`);
    if (TIME_KEYS.has(key) && !TIME.test(value)) bad(`has ${key}=${JSON.stringify(value)}, not a time`);
    if (key === 'type') bad('has a "type" record, which is not a POSIX keyword and would change the entry type');
    if (key.startsWith('GNU.sparse.')) bad(`has ${key}: sparse files are not supported`, 'SOURCE_UNSUPPORTED');
    off = end;
  }
  return keys;
}

/**
 * What a PAX global header (type 'g') may hold: a `comment` only (what `git archive` writes,
 * the commit id), which no reader applies to anything. Tar readers disagree on every other
 * record: GNU tar and Python's tarfile apply it to every later entry (a global `path` names
 * them all, a global `size` moves where the next header is read), node-tar all but `path`,
 * and Go's archive/tar (what containerd and umoci read layers with) to none. Any other
 * record would list the archive one way in stagedroot and another in some tool: refused.
 */
export function checkGlobalPaxRecords(raw: Buffer, layer: string, at: string): void {
  const applied = checkPaxRecords(raw, layer, at).filter((k) => k !== 'comment');
  if (applied.length > 0) {
    throw new StagedrootError('SOURCE_UNSUPPORTED', `${layer} is rejected: its PAX global header (${JSON.stringify(at)}) sets ${[...new Set(applied)].join(', ')}, which tar readers apply differently (GNU tar and Python to every later entry, Go's archive/tar as containerd and umoci use it to none); only a comment is accepted there`, { path: at });
  }
}

const XATTR_PREFIXES = ['SCHILY.xattr.', 'LIBARCHIVE.xattr.'] as const;

/** The prefix of an extended-attribute record's key, or null for any other key. */
function xattrKey(key: string): (typeof XATTR_PREFIXES)[number] | null {
  for (const p of XATTR_PREFIXES) if (key.startsWith(p) && key.length > p.length) return p;
  return null;
}

/**
 * Takes the extended attributes out of a checked PAX header: GNU tar and bsdtar's
 * `SCHILY.xattr.NAME=VALUE` (the value's raw bytes, how OCI layers carry file
 * capabilities) and bsdtar's `LIBARCHIVE.xattr.NAME=BASE64` (the name URL-encoded).
 * Returns them sorted by name, and the header without them, for node-tar's parser:
 * it splits records at newlines, which a binary value may contain.
 */
export function takeXattrRecords(raw: Buffer): { rest: Buffer; xattrs: [string, Buffer][]; rawPath?: Buffer; rawLinkpath?: Buffer } {
  const keep: Buffer[] = [];
  let rawPath: Buffer | undefined;
  let rawLinkpath: Buffer | undefined;
  const found = new Map<string, Buffer>();
  let off = 0;
  while (off < raw.length) {
    const sp = raw.indexOf(0x20, off);
    if (sp === -1 || raw.subarray(off).every((b) => b === 0)) break;
    const end = off + Number(raw.toString('latin1', off, sp));
    const eqAt = raw.indexOf(0x3d, sp + 1);
    const key = raw.toString('utf8', sp + 1, eqAt);
    const prefix = xattrKey(key);
    if (prefix === 'SCHILY.xattr.') found.set(key.slice(prefix.length), Buffer.from(raw.subarray(eqAt + 1, end - 1)));
    else if (prefix === 'LIBARCHIVE.xattr.') found.set(decodeURIComponent(key.slice(prefix.length)), Buffer.from(raw.toString('latin1', eqAt + 1, end - 1), 'base64'));
    else {
      // The bytes of a name, for a name that is not UTF-8 (GNU tar's hdrcharset=BINARY).
      if (key === 'path') rawPath = Buffer.from(raw.subarray(eqAt + 1, end - 1));
      if (key === 'linkpath') rawLinkpath = Buffer.from(raw.subarray(eqAt + 1, end - 1));
      keep.push(raw.subarray(off, end));
    }
    off = end;
  }
  return { rest: Buffer.concat(keep), xattrs: [...found].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)), rawPath, rawLinkpath };
}
