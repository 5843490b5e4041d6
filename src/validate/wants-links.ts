import type { Issue } from '../errors.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { findUnitFile, parseLinkDir, unitDirsIn } from '../systemd/unit-dirs.js';
import { listDirIn } from './systemd-verify.js';
import type { ValidationContext } from './types.js';

/** Why the link at `rel` does not lead to an existing entry inside the root, or null when it does. */
function dangling(tree: ReadOnlyTree, rel: string): string | null {
  let target: string | null;
  try {
    target = tree.readlink(rel);
  } catch {
    return null; // cannot be read: no link to judge
  }
  if (target === null) return null;
  try {
    const r = tree.resolve(rel, { followLast: true });
    return r === null || r.stat === null ? `its target ${target} does not exist in the tree${r === null ? '' : ` (resolved: /${r.rel})`}` : null;
  } catch (err) {
    return `its target ${target} cannot be resolved inside the tree: ${(err as Error).message}`;
  }
}

/**
 * Built-in validator: symlinks in `*.wants/`, `*.requires/` and `*.upholds/` under the
 * unit directories that lead nowhere inside the tree (resolved with chroot semantics,
 * so `/usr/lib/...` means the tree's usr/lib). A dangling link whose unit is not in the
 * tree at all is an error (a stale `enable` after the unit was removed or renamed). It
 * is a warning when the unit exists under another path (systemd pulls units in by the
 * link's name, so it works) or when the base tree had the same dangling link already
 * (the update did not cause it).
 */
export function checkWantsLinks(ctx: ValidationContext): Issue[] {
  const tree = ctx.staged;
  const base = ctx.base ?? null;
  const issues: Issue[] = [];
  for (const dir of unitDirsIn(tree)) {
    for (const sub of listDirIn(tree, dir)) {
      const linkDir = parseLinkDir(sub);
      if (linkDir === null) continue;
      for (const name of listDirIn(tree, `${dir}/${sub}`)) {
        const rel = `${dir}/${sub}/${name}`;
        const why = dangling(tree, rel);
        if (why === null) continue;
        const existsElsewhere = findUnitFile(tree, name) !== null;
        const preexisting = base !== null && dangling(base, rel) !== null;
        const note = existsElsewhere ? `; a unit named ${name} exists elsewhere in the tree, so systemd still finds it` : preexisting ? '; the booted tree has the same dangling link' : '';
        issues.push({
          code: 'DANGLING_UNIT_LINK',
          path: rel,
          message: `${linkDir.unit} ${linkDir.kind} ${name}, but ${why}${note}`,
          severity: existsElsewhere || preexisting ? 'warning' : 'error',
        });
      }
    }
  }
  return issues;
}
