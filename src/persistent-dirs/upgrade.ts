import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { hashFile } from '../fs/core/hash.js';
import { exists, listDir } from '../fs/core/host-paths.js';
import { patchManifest } from '../fs/manifests/patch-manifest.js';
import { overlayFile } from '../fs/manifests/manifest-overlay.js';
import { RootFs } from '../fs/trees/root-fs.js';
import type { BaseState } from '../state/schema.js';
import { saveState } from '../store/state-file.js';
import { DEFAULT_MERGED, sharedListText } from './config.js';

/**
 * Upgrades a sysroot made before shared directories existed (no `shared` in its state):
 * the booted deployment's var/ (the running system's state) moves into shared/var by one
 * rename, an empty var/ (the mount point) takes its place and the deployment's manifest
 * is rewritten without the moved entries; the state, written last, records `shared`.
 * A crash at any step is picked up by the next `open`. Older deployments keep their
 * var/ as it was (hidden under the mount when one of them boots): nothing is dropped.
 */
export function upgradeSharedLayout(ctx: Context, s: BaseState, actions: string[]): BaseState {
  if (s.shared !== undefined) return s;
  const { layout, dfs } = ctx;
  const id = s.booted ?? s.current;
  const tree = layout.tree(id);
  const root = new RootFs(tree, { faults: ctx.faults });
  const dst = layout.shared('var');
  const st = root.lstat('var');
  if (st !== null && !st.isDirectory()) {
    throw new StagedrootError('STATE_CORRUPT', `This sysroot predates shared directories and its booted deployment ${id} has a ${st.isSymbolicLink() ? 'symbolic link' : 'non-directory'} at var (${tree}/var): move it aside (e.g. \`mv ${tree}/var ${tree}/var.old && mkdir ${tree}/var\`) and run \`stagedroot status\` again; var/ is never dropped silently`, { path: `${tree}/var` });
  }
  dfs.mkdir(layout.sharedRoot);
  if (exists(dst)) {
    // A crash after the move: the tree's var/ must be empty (or missing).
    if (st !== null && listDir(`${tree}/var`).length > 0) {
      throw new StagedrootError('STATE_CORRUPT', `Cannot upgrade this sysroot to a shared /var: both ${dst} and ${tree}/var hold data; merge them by hand (e.g. \`rsync -a ${tree}/var/ ${dst}/ && rm -rf ${tree}/var/*\`), then run \`stagedroot status\` again`, { path: dst });
    }
  } else if (st === null) {
    dfs.mkdir(dst);
  } else {
    root.moveOut('var', dst);
  }
  if (root.lstat('var') === null) {
    const from = new RootFs(layout.sharedRoot).lstat('var')!;
    root.mkdir('var', { mode: from.mode & 0o7777, uid: from.uid, gid: from.gid });
  }
  const manifest = layout.manifest(id);
  const next = `${manifest}.upgraded`;
  // Written to a new file and renamed: the manifest may be a link another deployment
  // shares (see linked-manifest.ts). The new file holds what its overlay patched, so the
  // overlay goes after it (a crash between: this runs again at the next open).
  patchManifest(tree, manifest, next, [{ kind: 'remove', path: 'var' }], ctx.faults, true);
  dfs.rename(next, manifest);
  if (exists(overlayFile(manifest))) dfs.unlink(overlayFile(manifest));
  const sha = hashFile(manifest);
  dfs.writeFileAtomic(layout.sharedList, sharedListText(['var']));
  const upgraded: BaseState = {
    ...s,
    shared: ['var'],
    merged: s.merged ?? DEFAULT_MERGED,
    deployments: s.deployments.map((d) => (d.id === id ? { ...d, manifestSha256: sha } : d)),
  };
  saveState(layout, dfs, { ...upgraded, intent: null });
  actions.push(`upgraded to a shared /var: deployment ${id}'s var/ moved to ${dst}`);
  return upgraded;
}
