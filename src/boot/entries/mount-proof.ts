import * as path from 'node:path';
import type { FilesystemPath } from '../../fs/core/mount-path.js';
import { lstatPath } from '../../fs/core/host-paths.js';
import { SeenPaths, unchangedSince, type Identity } from './seen-paths.js';

/**
 * What lets the boot-entry record answer `filesystemPath(root)` (the entries'
 * `stagedroot=`) without reading mountinfo: the answer, when the mount holding the
 * sysroot is a whole filesystem (root `/`), and the identity of every directory on the
 * way to the sysroot (`/`, each component, then the sysroot's device and inode: its own
 * stamps move at every lock). While they hold, the path resolves through the same real
 * directories (no symlink), none renamed (a rename moves the renamed directory's ctime)
 * and none with an entry added or removed (the parent's mtime), and a mount placed on one
 * of them since would show its own root there unless it is that very directory (whose
 * path on its filesystem is the same): the sysroot's place on its filesystem is what it
 * was. Under a bind mount of a subdirectory or a btrfs subvolume (root not `/`) there is
 * no proof: a rename above the mount's root would not show on the way, so mountinfo is
 * read.
 */
export interface MountProof {
  fp: FilesystemPath;
  /** Identities of `/` and each directory down to the sysroot's parent (SeenPaths.entries). */
  seen: [string, Identity][];
  /** The sysroot directory's device and inode. */
  root: [number, number];
}

function prefixes(root: string): string[] {
  const out: string[] = [];
  for (let p = path.dirname(root); ; p = path.dirname(p)) {
    out.unshift(p);
    if (p === '/') return out;
  }
}

/** The proof for `fp` (null when there is none, or when a stamp on the way is too young to tell a later change apart: younger than `before`). */
export function mountProof(root: string, fp: FilesystemPath | null, before: number): MountProof | null {
  if (fp === null || fp.mountRoot !== '/' || !path.isAbsolute(root) || root === '/') return null;
  const seen = new SeenPaths();
  if (!prefixes(root).every((p) => seen.lstat(p)?.isDirectory())) return null;
  const st = lstatPath(root);
  if (st === null || !st.isDirectory() || seen.newestCtimeMs >= before) return null;
  return { fp, seen: seen.entries(root), root: [st.dev, st.ino] };
}

/** The recorded answer while its proof holds, else null (read mountinfo). */
export function provenFilesystemPath(proof: MountProof, root: string): FilesystemPath | null {
  const st = lstatPath(root);
  if (st === null || st.dev !== proof.root[0] || st.ino !== proof.root[1]) return null;
  return unchangedSince(proof.seen, root) ? proof.fp : null;
}
