import type { ChangeSet } from '../changeset.js';
import { StagedrootError } from '../errors.js';
import { freeSpace, statPath } from '../fs/core/host-paths.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { manifestTasks } from '../fs/manifests/tasks.js';

export interface FreeSpaceOptions {
  /** Bytes that must stay free after the stage (like ostree's min-free-space-size; default 0). */
  reserveBytes?: number;
}

export interface SpaceEstimate {
  /** Regular-file bytes of the base tree outside the hardlinked prefixes (copied or reflinked). */
  copyBytes: number;
  /** Bytes of new content in the change set; null when it cannot be known up front (streamed). */
  changeBytes: number | null;
  /** The new manifest (about the size of the base one). */
  manifestBytes: number;
  needed: number;
}

/**
 * What building the new tree will take, before anything is written: one pass over the
 * base manifest (no tree walk) plus the sizes of the change set's contents when it is
 * a list held in memory. Conservative on reflink filesystems, where copies share blocks.
 */
export async function estimateBytes(baseManifest: string, hardlinkPrefixes: readonly string[], cs: ChangeSet, o: { snapshot?: boolean; copyBytes?: number } = {}): Promise<SpaceEstimate> {
  // A pass over the base manifest, on a worker thread like the tree work (unless the caller
  // has its figure for these prefixes already: copyBytesOf); none for a btrfs snapshot,
  // which shares every block of the base tree.
  const copyBytes = o.snapshot ? 0 : (o.copyBytes ?? (await copyBytesOf(baseManifest, hardlinkPrefixes)));
  let changeBytes: number | null = null;
  if (Array.isArray(cs.ops)) {
    changeBytes = 0;
    for (const op of cs.ops as readonly import('../changeset.js').ChangeOp[]) {
      if (op.op !== 'write') continue;
      if (op.content.kind === 'bytes') changeBytes += op.content.data.length;
      else if (op.content.size !== undefined) changeBytes += op.content.size;
    }
  }
  const manifestBytes = statPath(baseManifest)?.size ?? 0;
  return { copyBytes, changeBytes, manifestBytes, needed: copyBytes + (changeBytes ?? 0) + manifestBytes };
}

/** What a copy of the base tree writes: the regular-file bytes of its manifest outside `hardlinkPrefixes` (a pass on a worker thread). */
export function copyBytesOf(baseManifest: string, hardlinkPrefixes: readonly string[]): Promise<number> {
  return runTreeTask(manifestTasks.sumFileSizes, { manifest: baseManifest, prefixes: [...hardlinkPrefixes] });
}

/** Bytes for people: "1.5 GiB (1610612736 bytes)". */
export function formatBytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${n} bytes` : `${v.toFixed(1)} ${units[i]} (${n} bytes)`;
}

function estimateParts(est: SpaceEstimate): string[] {
  return [`${formatBytes(est.copyBytes)} copied from the booted tree`, est.changeBytes === null ? 'new content of unknown size (streamed)' : `${formatBytes(est.changeBytes)} of new content`, `${formatBytes(est.manifestBytes)} of manifest`];
}

/**
 * The free-space preflight (statfs on the sysroot's filesystem), run before the tree is
 * built: rejects early with NO_SPACE, naming bytes needed and bytes free, instead of
 * failing with ENOSPC halfway through a copy.
 */
export function checkFreeSpace(sysrootDir: string, est: SpaceEstimate, o: FreeSpaceOptions = {}): { free: number; needed: number } {
  const reserve = o.reserveBytes ?? 0;
  const { free } = freeSpace(sysrootDir);
  const needed = est.needed + reserve;
  if (needed > free) {
    const parts = estimateParts(est);
    if (reserve > 0) parts.push(`${formatBytes(reserve)} reserved`);
    throw new StagedrootError('NO_SPACE', `Not enough free space to stage: ${formatBytes(needed)} needed (${parts.join(' + ')}), ${formatBytes(free)} free on the filesystem of ${sysrootDir}`, {
      value: { needed, free },
      issues: [{ code: 'NO_SPACE', path: '', message: `needed ${needed} bytes, free ${free} bytes`, severity: 'error' }],
    });
  }
  return { free, needed };
}

/**
 * A NO_SPACE error the filesystem raised in the middle of a stage (ENOSPC with the
 * preflight off, or another writer filling the disk meanwhile), with the figures a
 * person needs: free bytes when the stage started and after the failed write, and what
 * the stage needs by the preflight's estimate. Called before the partial tree is removed.
 */
export function withSpaceFigures(err: StagedrootError, sysrootDir: string, freeAtStart: number | null, est: SpaceEstimate | null): StagedrootError {
  const { free, total } = freeSpace(sysrootDir);
  const figures = [
    `the filesystem of ${sysrootDir} (${formatBytes(total)}) had ${freeAtStart === null ? '' : `${formatBytes(freeAtStart)} free when the stage started, `}${formatBytes(free)} after the failed write`,
    ...(est ? [`this stage needs about ${formatBytes(est.needed)} (${estimateParts(est).join(' + ')})`] : []),
  ];
  return new StagedrootError('NO_SPACE', `${err.message}: ${figures.join('; ')}`, {
    path: err.path,
    resolvedPath: err.resolvedPath,
    errno: err.errno,
    cause: err,
    value: { needed: est?.needed ?? null, free, freeAtStart, total },
    issues: [{ code: 'NO_SPACE', path: err.path ?? '', message: `ran out of space (${err.errno}): ${free} bytes free of ${total}${est ? `, about ${est.needed} bytes needed` : ''}`, severity: 'error' }],
  });
}
