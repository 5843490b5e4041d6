import { StagedrootError } from '../errors.js';
import { isUnder, normalizeTreePath } from '../fs/core/paths.js';
import type { BaseState } from '../state/schema.js';

/** The shared directories of a new sysroot unless told otherwise. */
export const DEFAULT_SHARED = ['var'];
/** The directories whose local changes finalize merges unless told otherwise. */
export const DEFAULT_MERGED = ['etc'];

/**
 * Checks and normalises a list of tree directories (`--shared`, `--merged`): paths inside
 * the root, no duplicates, none inside another, none the same as or around one of `other`.
 */
export function normalizeDirs(list: readonly string[], option: 'shared' | 'merged', other: readonly string[] = []): string[] {
  const out: string[] = [];
  for (const raw of list) {
    let p: string;
    try {
      p = normalizeTreePath(raw, `--${option} directory`);
    } catch (err) {
      throw new StagedrootError('USAGE', `Expected --${option} to name a directory inside the tree, got ${JSON.stringify(raw)}: ${(err as Error).message}`, { option, value: raw });
    }
    if (p === 'usr' || isUnder(p, 'usr') || p === 'proc' || p === 'sys' || p === 'dev') {
      throw new StagedrootError('USAGE', `--${option} ${raw}: ${p} belongs to the OS tree (or the kernel) and cannot be ${option === 'shared' ? 'shared' : 'merged'}`, { option, value: raw });
    }
    if (out.includes(p)) continue;
    const clash = [...out, ...other].find((q) => isUnder(p, q) || isUnder(q, p));
    if (clash !== undefined) {
      throw new StagedrootError('USAGE', `--${option} ${raw}: ${p} overlaps ${clash} (shared and merged directories must be apart)`, { option, value: raw });
    }
    out.push(p);
  }
  return out;
}

/** The sysroot's shared directories ([] in a sysroot made before they existed, until `open` upgrades it). */
export function sharedDirs(s: Pick<BaseState, 'shared'>): string[] {
  return s.shared ?? [];
}

export function mergedDirs(s: Pick<BaseState, 'merged'>): string[] {
  return s.merged ?? DEFAULT_MERGED;
}

/** The shared directory `p` is (or is under), or null. */
export function sharedRootOf(p: string, shared: readonly string[]): string | null {
  for (const d of shared) if (isUnder(p, d)) return d;
  return null;
}

/** The text of shared.list: one tree-relative path a line, for the initramfs (no JSON parser there). */
export function sharedListText(shared: readonly string[]): string {
  return shared.map((d) => `${d}\n`).join('');
}
