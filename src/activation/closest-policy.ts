import type { FilePolicy } from './policy.js';

/** `target` is strictly below `dir` (the MCO's IsSubdirectory: a clean prefix with a separator). */
function isBelow(dir: string, target: string): boolean {
  const d = dir.replace(/\/+$/, '');
  return target.startsWith(`${d}/`);
}

/**
 * The file policy for a path, as the MCO's FindClosestFilePolicyPathMatch picks it: the
 * policy whose path is the changed path or one of its parent directories, the longest
 * such path winning (the first of equal ones).
 */
export function closestFilePolicy(path: string, files: readonly FilePolicy[]): FilePolicy | undefined {
  let best: FilePolicy | undefined;
  for (const f of files) {
    if ((path === f.path || isBelow(f.path, path)) && f.path.length > (best?.path.length ?? 0)) best = f;
  }
  return best;
}

export { isBelow };
