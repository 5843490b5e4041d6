import type { Issue } from '../errors.js';
import { readLink } from '../fs/durable.js';
import { RootFs } from '../fs/root-fs.js';
import { UNIT_DIRS, listDirIn } from './systemd-verify.js';
import type { ValidationContext } from './types.js';
import { templateNameOf } from '../sources/ignition/unit-names.js';

const DEPENDENCY_DIR = /\.(wants|requires|upholds)$/;

/** Why the link at `rel` does not lead to an existing entry inside the root, or null when it does. */
function dangling(root: RootFs, rel: string): string | null {
  let link;
  try {
    link = root.resolve(rel);
  } catch {
    return null; // its parent is missing: there is no link
  }
  if (link.stat === null || !link.stat.isSymbolicLink()) return null;
  try {
    const target = root.resolve(rel, { followLast: true });
    return target.stat === null ? `its target ${readLink(link.hostPath)} does not exist in the tree (resolved: /${target.rel})` : null;
  } catch (err) {
    return `its target ${readLink(link.hostPath)} cannot be resolved inside the tree: ${(err as Error).message}`;
  }
}

/** Does a unit of this name exist in the tree's unit directories (systemd pulls a wanted unit in by name)? */
function unitExists(root: RootFs, name: string): boolean {
  const template = templateNameOf(name);
  return UNIT_DIRS.some((d) =>
    [name, template].some((n) => {
      try {
        return root.resolve(`${d}/${n}`, { followLast: true }).stat?.isFile() === true;
      } catch {
        return false;
      }
    }),
  );
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
  const root = new RootFs(ctx.tree);
  const base = ctx.baseTree ? new RootFs(ctx.baseTree) : null;
  const issues: Issue[] = [];
  for (const dir of UNIT_DIRS) {
    for (const sub of listDirIn(root, dir)) {
      if (!DEPENDENCY_DIR.test(sub)) continue;
      for (const name of listDirIn(root, `${dir}/${sub}`)) {
        const rel = `${dir}/${sub}/${name}`;
        const why = dangling(root, rel);
        if (why === null) continue;
        const existsElsewhere = unitExists(root, name);
        const preexisting = base !== null && dangling(base, rel) !== null;
        const note = existsElsewhere ? `; a unit named ${name} exists elsewhere in the tree, so systemd still finds it` : preexisting ? '; the booted tree has the same dangling link' : '';
        issues.push({
          code: 'DANGLING_UNIT_LINK',
          path: rel,
          message: `${sub.replace(DEPENDENCY_DIR, '')} ${sub.match(DEPENDENCY_DIR)![1]} ${name}, but ${why}${note}`,
          severity: existsElsewhere || preexisting ? 'warning' : 'error',
        });
      }
    }
  }
  return issues;
}
