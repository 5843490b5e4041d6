import { join } from 'node:path';
import { randomHex } from './random-hex.js';

/**
 * The one temp-name scheme of a write via a temp (fs/trees/write-via-temp.ts):
 * `.stagedroot-tmp-PID-HEX` beside the entry being replaced. Nothing else is ever named
 * so: any such name no writer holds (recovery runs under the writer lock) is a leftover
 * of a write a crash cut short, wherever it is.
 */
export const TEMP_PREFIX = '.stagedroot-tmp-';

const TEMP_NAME = /^\.stagedroot-tmp-\d+-[0-9a-f]+$/;

/** A fresh temp name in directory `dir` (a host path). */
export function tempNameIn(dir: string): string {
  return join(dir, `${TEMP_PREFIX}${process.pid}-${randomHex(6)}`);
}

/** True for a name the write-via-temp routine makes. */
export function isTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/**
 * True for a temp name older versions made (a sysroot an older version left after a
 * crash), removed as leftovers too: `.NAME.tmp-PID-R` (a file) and `.NAME.new-PID-R` (a
 * symlink) of the durable layer, the sysroot's files and the boot entries. With `of`,
 * only those whose NAME it accepts (in a directory stagedroot shares with others: a boot
 * directory). (A kept copy's old `NAME.tmp-PID` is copyOut's to remove; an old kernel
 * directory's `HASH.tmp` goes with every unused kernel directory.)
 */
export function isLegacyTempName(name: string, of: (target: string) => boolean = () => true): boolean {
  const m = /^\.(.+)\.(?:tmp|new)-\d+-[0-9a-f]+$/.exec(name);
  return m !== null && of(m[1]!);
}
