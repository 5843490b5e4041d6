import { StagedrootError } from '../errors.js';
import type { RootFs } from '../fs/trees/root-fs.js';
import { readLinkTarget } from '../fs/manifests/manifest.js';
import { walkTree } from '../fs/core/walk.js';

/**
 * The package manager's records, which must describe the tree they sit in: after a
 * rollback, dpkg's `status` and `info/` must be the rolled-back tree's, not the newer
 * one's. Under a shared /var they would not be, so each deployment keeps them under
 * usr/ (as rpm-ostree keeps the rpm database in /usr/lib/sysimage/rpm), and the shared
 * /var holds only a symbolic link to them. On a booted deployment /usr is read-only, so
 * `apt` there fails at once with "Read-only file system" instead of changing a tree that
 * other deployments share: packages change through `stagedroot stage --run`.
 */
export const PACKAGE_DBS: readonly { var: string; usr: string }[] = [
  { var: 'var/lib/dpkg', usr: 'usr/lib/sysimage/dpkg' },
  { var: 'var/lib/apt', usr: 'usr/lib/sysimage/apt' },
];

/**
 * Moves each package database found under var/ in a first tree to its place under usr/
 * (entry by entry through the safe-fs layer, so the manifest records it), leaving at
 * the old path a symbolic link to the new one (absolute: it lives in the shared /var
 * and resolves in whichever deployment booted). Returns the paths moved.
 */
export function relocatePackageDbs(root: RootFs): string[] {
  const moved: string[] = [];
  for (const db of PACKAGE_DBS) {
    const st = root.lstat(db.var);
    if (st === null || !st.isDirectory() || existsIn(root, db.usr)) continue;
    root.mkdir(db.usr, { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid });
    const host = root.resolve(db.var).hostPath;
    const dirs: { rel: string; mode: number; uid: number; gid: number }[] = [];
    walkTree(host, {
      enter(rel, h, e) {
        const from = `${db.var}/${rel}`;
        const to = `${db.usr}/${rel}`;
        if (e.isDirectory()) {
          root.mkdir(to, { mode: 0o700 });
          dirs.push({ rel: to, mode: e.mode & 0o7777, uid: e.uid, gid: e.gid });
        } else if (e.isSymbolicLink()) {
          root.symlink(to, readLinkTarget(h), { uid: e.uid, gid: e.gid });
        } else {
          root.link(to, from);
        }
      },
    });
    // Directory modes last: one that forbids writing must not stop its own children.
    for (const d of dirs.reverse()) root.setAttrs(d.rel, { mode: d.mode, uid: d.uid, gid: d.gid });
    root.remove(db.var, { recursive: true });
    root.symlink(db.var, `/${db.usr}`);
    moved.push(db.var);
  }
  return moved;
}

/** True when `p` exists in the tree (a missing parent is not an error here). */
function existsIn(root: RootFs, p: string): boolean {
  try {
    return root.lstat(p) !== null;
  } catch (err) {
    if (err instanceof StagedrootError && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return false;
    throw err;
  }
}
