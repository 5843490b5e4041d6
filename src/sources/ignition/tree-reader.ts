import { isStagedrootError } from '../../errors.js';
import { listDir, readLink } from '../../fs/durable.js';
import type { RootFs } from '../../fs/root-fs.js';

export type EntryKind = 'file' | 'dir' | 'symlink' | 'other';

export interface EntryInfo {
  kind: EntryKind;
  ino: number;
  dev: number;
  /** The link target, for a symlink. */
  target?: string;
}

/**
 * Read-only questions about a tree, answered through RootFs's chroot-style resolution
 * (a base tree's own `etc -> /etc` stays inside it). A path whose parent does not exist
 * (or is not a directory) simply does not exist here; the writer reports that case.
 */
export class TreeReader {
  constructor(readonly root: RootFs) {}

  /** What is at `p` (a final symlink not followed), or null. */
  entry(p: string): EntryInfo | null {
    let r;
    try {
      r = this.root.resolve(p);
    } catch (err) {
      if (isStagedrootError(err) && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return null;
      throw err;
    }
    const st = r.stat;
    if (st === null) return null;
    const kind: EntryKind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
    return { kind, ino: st.ino, dev: st.dev, ...(kind === 'symlink' ? { target: readLink(r.hostPath) ?? '' } : {}) };
  }

  /** The same entry with symlinks followed (inside the root), or null when absent or dangling. */
  followed(p: string): EntryInfo | null {
    let r;
    try {
      r = this.root.resolve(p, { followLast: true });
    } catch (err) {
      if (isStagedrootError(err) && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return null;
      throw err;
    }
    if (r.stat === null) return null;
    return { kind: r.stat.isFile() ? 'file' : r.stat.isDirectory() ? 'dir' : 'other', ino: r.stat.ino, dev: r.stat.dev };
  }

  /** A regular file's bytes (symlinks followed inside the root), or null when absent. */
  readFile(p: string): Buffer | null {
    const e = this.followed(p);
    return e === null ? null : this.root.readFile(p);
  }

  /** Names in a directory (symlinks followed inside the root); [] when absent. */
  list(p: string): string[] {
    const e = this.followed(p);
    if (e === null || e.kind !== 'dir') return [];
    return listDir(this.root.resolve(p, { followLast: true }).hostPath);
  }
}
