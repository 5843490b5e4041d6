import type * as fs from 'node:fs';
import { lstatPath } from './host-paths.js';
import { hostPath } from './names.js';

/**
 * The own stat of the entry at tree path `rel` (its last component not followed), or
 * null when the tree has no such entry: absent, or a component above it is not a real
 * directory. A plain lstat of the host path follows a symlink above the entry — a tree
 * whose `etc` is a link to `/etc` would answer with the host's files. `dirs` remembers
 * the tree paths already seen to be directories, so a batch costs one lstat per
 * directory, not one per component of every path.
 */
export function lstatInTree(tree: string, rel: string, dirs: Set<string> = new Set()): fs.Stats | null {
  for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) {
    const parent = rel.slice(0, i);
    if (dirs.has(parent)) continue;
    const st = lstatPath(hostPath(tree, parent));
    if (st === null || !st.isDirectory()) return null;
    dirs.add(parent);
  }
  return lstatPath(hostPath(tree, rel));
}
