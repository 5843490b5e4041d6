import { StagedrootError } from './errors.js';

/** The CLI's exit codes (docs/errors.md). */
export const EXIT = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  REJECTED: 3,
  BUSY: 4,
} as const;

export function exitCodeFor(err: unknown): number {
  if (!(err instanceof StagedrootError)) return EXIT.FAILED;
  if (err.code === 'BUSY') return EXIT.BUSY;
  if (err.code === 'USAGE') return EXIT.USAGE;
  if (err.isRejection) return EXIT.REJECTED;
  return EXIT.FAILED;
}
