import { listDir, lstatPath, readText, statPath } from '../../fs/core/host-paths.js';

type Stats = NonNullable<ReturnType<typeof lstatPath>>;

/**
 * A path's cheap identity: device, inode, size, mtime and ctime (ms), or null when it is
 * not there. A write in place, a chmod or a `touch` moves the ctime, which no user sets; a
 * replacement is another inode; a directory's entries added, removed or renamed move its
 * mtime and ctime. Numbers, compared as numbers: every `open` with a boot directory
 * checks a few dozen.
 */
export type Identity = [dev: number, ino: number, size: number, mtimeMs: number, ctimeMs: number] | null;

function identity(st: Stats | null): Identity {
  return st === null ? null : [st.dev, st.ino, st.size, st.mtimeMs, st.ctimeMs];
}

function same(st: Stats | null, id: Identity): boolean {
  if (st === null || id === null) return st === id;
  return st.ino === id[1] && st.ctimeMs === id[4] && st.mtimeMs === id[3] && st.size === id[2] && st.dev === id[0];
}

/** `l` + path: the path's own lstat (a symlink itself); `s` + path: stat, following symlinks (what a read of it reads). */
function look(key: string, root = ''): Stats | null {
  const p = key[1] === '/' ? key.slice(1) : `${root}/${key.slice(1)}`;
  return key.startsWith('l') ? lstatPath(p) : statPath(p);
}

/**
 * What a boot-entry sync looked at, each path's identity taken before it was read (a
 * change after the stat and before the read shows as another identity at the next
 * check). A path looked at twice with two identities changed during the sync: `stable`
 * is false then, and no record is made of it.
 */
export class SeenPaths {
  private readonly seen = new Map<string, Identity>();
  stable = true;
  /** The newest ctime seen (ms): a record is trusted only once its stamps are older than the filesystems' timestamp granularity. */
  newestCtimeMs = 0;

  private take(key: string): Stats | null {
    const st = look(key);
    const before = this.seen.get(key);
    if (before === undefined) this.seen.set(key, identity(st));
    else if (!same(st, before)) this.stable = false;
    if (st !== null && st.ctimeMs > this.newestCtimeMs) this.newestCtimeMs = st.ctimeMs;
    return st;
  }

  /** The path's own stat (before reading a link, or deciding a path is a regular file or a real directory). */
  lstat(p: string): Stats | null {
    return this.take(`l${p}`);
  }

  /** The stat of what the path leads to (before listing a directory or reading a file through it). */
  stat(p: string): Stats | null {
    return this.take(`s${p}`);
  }

  /** A directory's names, its identity seen first (a name added or removed moves its mtime and ctime). */
  list(dir: string): string[] {
    this.stat(dir);
    return listDir(dir);
  }

  /** A file's text, its identity seen first. */
  read(file: string): string | null {
    this.stat(file);
    return readText(file);
  }

  /**
   * What to check again, without what another entry already answers: the stat of a real
   * directory whose lstat is there (the same inode), and anything under a path that was
   * not there (it cannot be reached until that path changes). Paths under `root` are
   * kept relative to it (shorter to read back at every `open`).
   */
  entries(root: string): [string, Identity][] {
    const absent = [...this.seen].filter(([, id]) => id === null).map(([k]) => `${k.slice(1)}/`);
    return [...this.seen]
      .filter(([k, id]) => {
        const p = k.slice(1);
        const l = this.seen.get(`l${p}`);
        if (k.startsWith('s') && id !== null && l !== undefined && l !== null && l.every((x, i) => x === id[i])) return false;
        return !absent.some((a) => p.startsWith(a));
      })
      .map(([k, id]) => [k.startsWith(`${root}/`, 1) ? k[0]! + k.slice(root.length + 2) : k, id]);
  }
}

/** True when every path of `entries` (SeenPaths.entries with the same `root`) has the identity it had. */
export function unchangedSince(entries: readonly (readonly [string, Identity])[], root: string): boolean {
  return entries.every(([key, id]) => same(look(key, root), id));
}
