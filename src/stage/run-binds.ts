import { StagedrootError } from '../errors.js';
import { FRESH_DIRS } from '../sources/command.js';
import type { RootFs } from '../fs/trees/root-fs.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';

/**
 * The mount points of `stage --run --bind DIR` in the new tree: each DIR must be a
 * directory of the running system; its path in the tree is made where it is missing
 * (through the tree's RootFs: no component followed as a symlink, so a tree that ships
 * `mnt -> /` cannot point the bind at the running system) and those made are returned,
 * deepest last, for `removeBindMountPoints` to take away after the command: the update
 * never gains an empty directory because of a bind.
 */
export function makeBindMountPoints(tree: RootFs, host: ReadOnlyTree, binds: readonly string[]): string[] {
  const made: string[] = [];
  for (const b of binds) {
    if (!host.stat(b)?.isDirectory()) {
      throw new StagedrootError('USAGE', `--bind ${b}: no such directory on the running system`, { option: 'bind', value: b });
    }
    const parts = b.split('/').filter((p) => p !== '');
    // Under /tmp and /run the namespace makes the mount point in its own tmpfs.
    if (FRESH_DIRS.includes(parts[0]!)) continue;
    for (let i = 1; i <= parts.length; i++) {
      const rel = parts.slice(0, i).join('/');
      const st = tree.lstat(rel);
      if (st === null) {
        tree.mkdir(rel, { mode: 0o755 });
        made.push(rel);
      } else if (!st.isDirectory()) {
        throw new StagedrootError('USAGE', `--bind ${b}: /${rel} in the new tree is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}; the bind needs a directory there`, { option: 'bind', value: b });
      }
    }
  }
  return made;
}

/** Removes the mount points `makeBindMountPoints` made, deepest first (empty again once the namespace is gone). */
export function removeBindMountPoints(tree: RootFs, made: readonly string[]): void {
  for (const rel of [...made].reverse()) tree.remove(rel, { missingOk: true });
}
