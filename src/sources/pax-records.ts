import { StagedrootError } from '../errors.js';

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

/** `layer` names the archive, `entry` the entry the header belongs to (as far as it is known). */
export function checkPaxRecords(raw: Buffer, layer: string, entry: string): void {
  const bad = (why: string, code: 'SOURCE_CORRUPT' | 'PATH_ESCAPE' | 'SOURCE_UNSUPPORTED' = 'SOURCE_CORRUPT'): never => {
    throw new StagedrootError(code, `${layer} is rejected: the PAX extended header for ${JSON.stringify(entry)} ${why}`, { path: entry });
  };
  let off = 0;
  while (off < raw.length) {
    if (raw.subarray(off).every((b) => b === 0)) return; // NUL padding some writers add
    const sp = raw.indexOf(0x20, off);
    const lenText = sp === -1 ? '' : raw.toString('latin1', off, sp);
    if (!DECIMAL.test(lenText)) bad(`has a malformed record at byte ${off}`);
    const len = Number(lenText);
    const end = off + len;
    if (end > raw.length || end <= sp + 1 || raw[end - 1] !== 0x0a) bad(`has a record at byte ${off} whose length (${len}) does not match its content`);
    const text = raw.toString('utf8', sp + 1, end - 1);
    const eq = text.indexOf('=');
    if (eq <= 0) bad(`has a record at byte ${off} without a key`);
    const key = text.slice(0, eq);
    const value = text.slice(eq + 1);
    if (value.includes('\n')) bad(`has a ${key} value with a newline, which tar readers disagree on`, 'SOURCE_UNSUPPORTED');
    if ((key === 'path' || key === 'linkpath') && value.includes('\0')) bad(`has a ${key} containing a NUL byte: ${JSON.stringify(value)}`, 'PATH_ESCAPE');
    if (NUMERIC_KEYS.has(key) && !DECIMAL.test(value)) bad(`has ${key}=${JSON.stringify(value)}, not a non-negative decimal number`);
    if (TIME_KEYS.has(key) && !TIME.test(value)) bad(`has ${key}=${JSON.stringify(value)}, not a time`);
    if (key === 'type') bad('has a "type" record, which is not a POSIX keyword and would change the entry type');
    if (key.startsWith('GNU.sparse.')) bad(`has ${key}: sparse files are not supported`, 'SOURCE_UNSUPPORTED');
    off = end;
  }
}
