import { StagedrootError } from '../errors.js';
import type { RootFs } from '../fs/trees/root-fs.js';

/**
 * Every deployment's tree has an empty directory at each shared path: the mount point
 * the boot path binds the shared directory onto. A stage leaves it so (whatever the base
 * tree or a layer put there is cleared: it would only be hidden under the mount).
 */
export function settleMountPoints(root: RootFs, shared: readonly string[]): void {
  for (const rel of shared) {
    const st = root.lstat(rel);
    if (st === null) root.mkdir(rel, { mode: 0o755 });
    else if (st.isDirectory()) root.clearDirectory(rel);
    else {
      throw new StagedrootError('APPLY_FAILED', `${rel} is a shared directory, but the new tree has a ${st.isSymbolicLink() ? 'symbolic link' : 'non-directory'} there: it must be a directory (the mount point)`, { path: rel });
    }
  }
}

/**
 * The first tree's content under each shared path moves into the sysroot's shared
 * directory (one rename each), leaving an empty mount point with the same attributes.
 */
export function moveOutShared(root: RootFs, shared: readonly string[], hostOf: (rel: string) => string, mkdirHost: (host: string) => void): void {
  for (const rel of shared) {
    const st = root.lstat(rel);
    if (st !== null && !st.isDirectory()) {
      throw new StagedrootError('USAGE', `${rel} is to be a shared directory, but the source has a ${st.isSymbolicLink() ? 'symbolic link' : 'non-directory'} there`, { path: rel });
    }
    const dst = hostOf(rel);
    mkdirHost(dst.slice(0, dst.lastIndexOf('/')));
    if (st === null) {
      mkdirHost(dst);
      root.mkdir(rel, { mode: 0o755 });
      continue;
    }
    root.moveOut(rel, dst);
    root.mkdir(rel, { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid });
  }
}
