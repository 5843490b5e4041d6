import { StagedrootError, errnoOf } from '../errors.js';
import { freeSpace } from './durable.js';
import { ManifestReader } from './manifest.js';
import { isUnder } from './paths.js';

/** Bytes of the regular files a copy policy copies rather than hardlinks (from a manifest). */
export function copiedBytes(manifest: string, hardlinkPrefixes: readonly string[]): number {
  let total = 0;
  const r = new ManifestReader(manifest);
  try {
    for (let e = r.next(); e !== null; e = r.next()) {
      if (e.t === 'f' && !hardlinkPrefixes.some((p) => isUnder(e.p, p))) total += e.s ?? 0;
    }
  } finally {
    r.close();
  }
  return total;
}

/** True for a filesystem-full error, wrapped or not. */
export function isNoSpace(err: unknown): boolean {
  if (err instanceof StagedrootError) return err.code === 'NO_SPACE';
  const e = errnoOf(err);
  return e === 'ENOSPC' || e === 'EDQUOT';
}

export function formatBytes(n: number): string {
  const mib = n / (1 << 20);
  return mib >= 10 ? `${mib.toFixed(0)} MiB` : `${mib.toFixed(1)} MiB`;
}

export interface NoSpaceFigures {
  /** What ran out, for the message ("staging deployment 0003"). */
  what: string;
  /** The directory whose filesystem filled up. */
  dir: string;
  /** Free bytes when the operation began. */
  freeBefore: number;
  /** Bytes the operation needed at least (what it copies), when known. */
  needed: number | null;
  /** How `needed` was reckoned, for the message. */
  neededWhy: string;
}

/**
 * A NO_SPACE error that gives the figures: what was needed, what was free (when the
 * operation began, and the filesystem's size), and where it ran out.
 */
export function noSpaceError(err: unknown, f: NoSpaceFigures): StagedrootError {
  const inner = err instanceof StagedrootError ? err : null;
  let total: number | null = null;
  try {
    total = freeSpace(f.dir).total;
  } catch {
    // the figures are a courtesy; the error stands without them
  }
  const needed = f.needed === null ? 'more space' : `about ${formatBytes(f.needed)} (${f.neededWhy})`;
  const where = inner?.path !== undefined ? `; it ran out writing ${inner.path}` : '';
  const message =
    `Not enough space for ${f.what}: it needs ${needed}, but only ${formatBytes(f.freeBefore)} was free` +
    `${total === null ? '' : ` of ${formatBytes(total)}`} on the filesystem of ${f.dir} when it began${where} (${inner?.errno ?? errnoOf(err) ?? 'ENOSPC'})`;
  return new StagedrootError('NO_SPACE', message, {
    path: inner?.path,
    resolvedPath: inner?.resolvedPath,
    errno: inner?.errno ?? errnoOf(err) ?? 'ENOSPC',
    cause: err,
  });
}
