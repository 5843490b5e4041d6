import { StagedrootError } from '../errors.js';

/**
 * Options checked once, where they enter (Sysroot.open/init, stage, the health checks),
 * and reported as execa reports its own: the option, what it must be, the value given and
 * its type. Code below the boundary trusts what was checked.
 */
export function optionError(option: string, expected: string, value: unknown): StagedrootError {
  return new StagedrootError('USAGE', `Expected the \`${option}\` option to be ${expected}, got \`${shown(value)}\` (${typeName(value)})`, { option, value });
}

function shown(v: unknown): string {
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' || v === undefined || v === null) return String(v);
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/**
 * Seconds a writer waits for the lock: a non-negative finite number (0: fail at once with
 * BUSY). The one check of it, for the library's `waitSeconds` and the CLI's `--wait` (which
 * passes the number its text reads as, and the text as given, for the message).
 */
export function checkWaitSeconds(v: unknown, option = 'waitSeconds', given: unknown = v): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw optionError(option, 'a non-negative number of seconds', given);
  return v;
}

/** A timeout: a positive integer of milliseconds. */
export function checkTimeoutMs(v: unknown, option: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw optionError(option, 'a positive integer of milliseconds', v);
  return v;
}
