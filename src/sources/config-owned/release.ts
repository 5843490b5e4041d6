import { bytes, type ChangeOp } from '../../changeset.js';
import type { ReadOnlyTree } from '../../fs/trees/read-only-tree.js';
import type { ConfigRecord, OwnedPath } from '../../state/config-record.js';
import { enablementLinks, key } from './owned-paths.js';

export interface Release {
  /** Ops that let the previous config's paths go, applied before the new config's. */
  ops: ChangeOp[];
  /** What was let go, for the change set's description and the tests: "restored etc/x", "deleted etc/y". */
  released: { path: string; action: 'restored' | 'deleted' | 'disabled' | 'kept' }[];
  warnings: { path: string; message: string }[];
}

/**
 * What the previous config of this owner owned and the new one does not, let go (as the
 * machine-config-daemon's deleteStaleData does): a path the base image had is restored to
 * the base image's version (the one recorded when a config of this owner first wrote it),
 * any other path is deleted, a directory the config created is removed once nothing but
 * released paths is in it, a unit the config enabled (and that was not enabled before)
 * loses its enablement links. Deepest paths go first. Planned against the base tree, so
 * dry-run, diff and the delta show every one of these paths.
 */
export function releaseOps(prior: ConfigRecord | null, owned: readonly OwnedPath[], tree: ReadOnlyTree): Release {
  const out: Release = { ops: [], released: [], warnings: [] };
  if (prior === null) return out;
  const keep = new Set(owned.map(key));
  const stillEnabled = new Set(owned.filter((o) => o.kind === 'enabled').map((o) => o.path));
  const gone = prior.owned.filter((o) => !keep.has(key(o)));
  const removed = new Set<string>();
  const depth = (o: OwnedPath): number => (o.kind === 'enabled' ? -1 : o.path.split('/').length);
  for (const o of [...gone].sort((a, b) => depth(b) - depth(a) || (a.path < b.path ? -1 : 1))) {
    if (o.kind === 'enabled') {
      if (o.wasEnabled || stillEnabled.has(o.path)) continue;
      for (const link of enablementLinks(tree, o.path)) {
        out.ops.push({ op: 'remove', path: link, missingOk: true });
        removed.add(link);
      }
      out.released.push({ path: o.path, action: 'disabled' });
      continue;
    }
    const here = tree.lstat(o.path);
    if (o.original === null) {
      if (here === null) continue;
      if (here.isDirectory() && !here.isSymbolicLink()) {
        const left = (tree.readdir(o.path) ?? []).filter((c) => !removed.has(`${o.path}/${c}`));
        if (left.length > 0) {
          out.warnings.push({ path: o.path, message: `/${o.path} was created by the previous config but holds ${left.length} entr${left.length === 1 ? 'y' : 'ies'} it does not own (${left.slice(0, 3).join(', ')}): kept` });
          out.released.push({ path: o.path, action: 'kept' });
          continue;
        }
      }
      out.ops.push({ op: 'remove', path: o.path, recursive: here.isDirectory(), missingOk: true });
      removed.add(o.path);
      out.released.push({ path: o.path, action: 'deleted' });
      continue;
    }
    const orig = o.original;
    const ids = { uid: orig.uid, gid: orig.gid };
    if (orig.type === 'directory') {
      if (here !== null && !here.isDirectory()) out.ops.push({ op: 'remove', path: o.path, missingOk: true });
      out.ops.push({ op: 'mkdir', path: o.path, mode: orig.mode, ...ids });
    } else {
      if (here?.isDirectory() && !here.isSymbolicLink()) out.ops.push({ op: 'remove', path: o.path, recursive: true, missingOk: true });
      if (orig.type === 'file') out.ops.push({ op: 'write', path: o.path, content: bytes(Buffer.from(orig.data, 'base64')), mode: orig.mode, overwrite: true, ...ids });
      else out.ops.push({ op: 'symlink', path: o.path, target: orig.target, overwrite: true, ...ids });
    }
    out.released.push({ path: o.path, action: 'restored' });
  }
  return out;
}
