import { StagedrootError } from '../errors.js';
import type { RootFs } from '../fs/trees/root-fs.js';
import { readLinkTarget } from '../fs/manifests/manifest.js';
import { walkTree } from '../fs/core/walk.js';
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';

/**
 * The package manager's records, which must describe the tree they sit in: after a
 * rollback, dpkg's `status` and `info/` must be the rolled-back tree's, not the newer
 * one's. Under a shared /var they would not be, so each deployment keeps them under
 * usr/ (as rpm-ostree keeps the rpm database in /usr/lib/sysimage/rpm), and the shared
 * /var holds only a symbolic link to them. On a booted deployment /usr is read-only, so
 * `apt` there fails at once with "Read-only file system" instead of changing a tree that
 * other deployments share: packages change through `stagedroot stage --run`.
 *
 * Besides dpkg's database (its alternatives, diversions and triggers included) and apt's,
 * the state that Debian's maintainer scripts keep about the tree's own /etc, /usr and
 * /boot travels too: debconf's answers and templates, ucf's registry of the conffiles it
 * manages (and their pristine copies), deb-systemd-helper's record of the units packages
 * enabled or masked, pam-auth-update's profiles, and initramfs-tools' list of the kernels
 * it built an initramfs for (which `update-initramfs -u` updates). Each describes files
 * of one tree: shared, a rollback would leave it describing the newer one.
 */
export const PACKAGE_DBS: readonly { var: string; usr: string }[] = [
  { var: 'var/lib/dpkg', usr: 'usr/lib/sysimage/dpkg' },
  { var: 'var/lib/apt', usr: 'usr/lib/sysimage/apt' },
  { var: 'var/cache/debconf', usr: 'usr/lib/sysimage/debconf' },
  { var: 'var/lib/ucf', usr: 'usr/lib/sysimage/ucf' },
  { var: 'var/lib/systemd/deb-systemd-helper-enabled', usr: 'usr/lib/sysimage/deb-systemd-helper-enabled' },
  { var: 'var/lib/systemd/deb-systemd-helper-masked', usr: 'usr/lib/sysimage/deb-systemd-helper-masked' },
  { var: 'var/lib/pam', usr: 'usr/lib/sysimage/pam' },
  { var: 'var/lib/initramfs-tools', usr: 'usr/lib/sysimage/initramfs-tools' },
];

const DPKG = PACKAGE_DBS[0]!;

/** A tree with dpkg's database (under var/ or already under usr/): a Debian one, whose package state gets its places. */
function isDebian(root: RootFs): boolean {
  return (lstatIn(root, DPKG.var)?.isDirectory() ?? false) || (lstatIn(root, DPKG.usr)?.isDirectory() ?? false);
}

/**
 * Moves each package database found under var/ in a first tree to its place under usr/
 * (entry by entry through the safe-fs layer, so the manifest records it), leaving at
 * the old path a symbolic link to the new one (absolute: it lives in the shared /var
 * and resolves in whichever deployment booted). In a Debian tree, one that does not
 * exist yet (no package used ucf so far) gets an empty place and its link, so that a
 * package installed later by `stage --run` keeps its state in the new tree. Returns the
 * var/ paths that are links now.
 */
export function relocatePackageDbs(root: RootFs): string[] {
  const moved: string[] = [];
  const debian = isDebian(root);
  for (const db of PACKAGE_DBS) {
    const st = lstatIn(root, db.var);
    if (existsIn(root, db.usr)) continue;
    if (st === null && debian) {
      root.mkdir(db.usr, { mode: 0o755 });
      root.symlink(db.var, `/${db.usr}`);
      moved.push(db.var);
      continue;
    }
    if (st === null || !st.isDirectory()) continue;
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

/**
 * Before a `stage --run` command, in a Debian tree: every place of package state under
 * usr/ exists (a tree adopted before one was listed, or before any package used it), so
 * the command's /var links to all of them and what its maintainer scripts record stays
 * in the new tree. A place the machine still keeps as a real directory in its shared
 * /var (adopted before it was listed: debconf's answers, say) is filled with a copy of
 * it, so the command sees the state it has; the shared /var is only read.
 */
export function ensurePackageDbPlaces(tree: RootFs, liveVar?: string): void {
  if (!isDebian(tree)) return;
  const live = liveVar === undefined ? null : new ReadOnlyTree(liveVar);
  for (const db of PACKAGE_DBS) {
    if (lstatIn(tree, db.usr) !== null) continue;
    const rel = db.var.slice('var/'.length);
    const from = live?.lstat(rel)?.isDirectory() ? live.resolve(rel) : null;
    if (from === null) {
      tree.mkdir(db.usr, { mode: 0o755 });
      continue;
    }
    tree.copyIn(db.usr, from.hostPath);
    const dirs: { rel: string; mode: number; uid: number; gid: number }[] = [];
    walkTree(from.hostPath, {
      enter(r, h, e) {
        const to = `${db.usr}/${r}`;
        if (e.isDirectory()) {
          tree.mkdir(to, { mode: 0o700 });
          dirs.push({ rel: to, mode: e.mode & 0o7777, uid: e.uid, gid: e.gid });
        } else if (e.isFile() || e.isSymbolicLink()) {
          tree.copyIn(to, h);
        }
      },
    });
    for (const d of dirs.reverse()) tree.setAttrs(d.rel, { mode: d.mode, uid: d.uid, gid: d.gid });
  }
}

/** `p`'s lstat in the tree, null when it or a parent is missing. */
function lstatIn(root: RootFs, p: string): ReturnType<RootFs['lstat']> {
  try {
    return root.lstat(p);
  } catch (err) {
    if (err instanceof StagedrootError && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return null;
    throw err;
  }
}

/** True when `p` exists in the tree (a missing parent is not an error here). */
function existsIn(root: RootFs, p: string): boolean {
  return lstatIn(root, p) !== null;
}
