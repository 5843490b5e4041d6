import type { Issue } from '../errors.js';
import { normalizeTreePath } from '../fs/core/paths.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import type { ValidationContext } from './types.js';

/**
 * Required by default, but only when the booted tree has them: an update must not drop
 * the OS identity (a tree that never had one, such as a test tree, is not held to it).
 */
export const DEFAULT_REQUIRED_PATHS: readonly string[] = ['etc/os-release'];

export interface RequiredPathsOptions {
  /** Paths that must exist in the staged tree (symlinks followed inside it). Replaces the default rule. */
  paths?: readonly string[];
}

/** Why `rel` is not usable in the tree, or null when it exists (following symlinks inside the root). */
function missing(tree: ReadOnlyTree, rel: string): string | null {
  try {
    const r = tree.resolve(rel, { followLast: true });
    if (r === null) return 'a directory on its path does not exist';
    if (r.stat !== null) return null;
    return r.rel === rel ? 'it does not exist' : `it is a symlink to /${r.rel}, which does not exist`;
  } catch (err) {
    return `it cannot be resolved: ${(err as Error).message}`;
  }
}

/**
 * Built-in validator: required paths are present in the staged tree. With `paths`
 * given, exactly those; otherwise DEFAULT_REQUIRED_PATHS that the booted tree has.
 */
export function checkRequiredPaths(ctx: ValidationContext, o: RequiredPathsOptions = {}): Issue[] {
  const tree = ctx.staged;
  let paths: string[];
  if (o.paths !== undefined) {
    paths = o.paths.map((p) => normalizeTreePath(p, 'required path'));
  } else {
    const base = ctx.base ?? null;
    paths = base === null ? [] : DEFAULT_REQUIRED_PATHS.filter((p) => missing(base, p) === null);
  }
  const issues: Issue[] = [];
  for (const p of paths) {
    const why = missing(tree, p);
    if (why !== null) issues.push({ code: 'REQUIRED_PATH_MISSING', path: p, message: `required path /${p} is missing from the staged tree: ${why}`, severity: 'error' });
  }
  return issues;
}
