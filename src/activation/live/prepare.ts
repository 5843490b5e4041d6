import * as path from 'node:path';
import { StagedrootError } from '../../errors.js';
import { comparePaths } from '../../fs/core/paths.js';
import { hashFile } from '../../fs/core/hash.js';
import { readXattrs } from '../../fs/core/xattr.js';
import { copyOut } from '../../fs/trees/copy-entry.js';
import type { DurableFs } from '../../fs/trees/durable.js';
import { exists } from '../../fs/core/host-paths.js';
import { ReadOnlyTree } from '../../fs/trees/read-only-tree.js';
import type { PolicyAction } from '../../state/activation.js';
import { IMAGES_DIR, imagePath, journalFile, JOURNAL_VERSION, writeJournal, type BeforeImage, type JournalEntry, type LiveJournal } from './journal.js';

/** A path a live apply changes in the running root: `write` (the staged tree's entry) or `remove`. */
export interface LiveChange {
  path: string;
  change: 'write' | 'remove';
}

export interface PrepareOptions {
  /** The sysroot's durable writer (its fault hook sees every write of the journal and the images). */
  dfs: DurableFs;
  /** The journal's directory (created; outside every tree). */
  dir: string;
  deployment: string;
  /** Host path of the staged deployment's tree. */
  source: string;
  /** Host path of the running root. */
  root: string;
  changes: readonly LiveChange[];
  daemonReload: boolean;
  actions: readonly PolicyAction[];
  /** The service manager's command, recorded for recovery's undo. */
  services?: readonly string[];
  bootId?: string;
}

const parentsOf = (p: string): string[] => p.split('/').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('/'));

/**
 * The entries in the order they are written (a parent before its children), one per path,
 * with every missing parent of a written path added as a `write` of the staged tree's
 * directory (so that undo removes what the apply created, and the parent gets the staged
 * tree's mode, owner and label, not a default). A parent that is not a directory in the
 * running root is refused here, before anything is written.
 */
export function plannedChanges(live: ReadOnlyTree, source: ReadOnlyTree, changes: readonly LiveChange[]): LiveChange[] {
  const byPath = new Map<string, LiveChange>();
  for (const c of changes) byPath.set(c.path, c);
  for (const c of changes) {
    if (c.change !== 'write') continue;
    for (const a of parentsOf(c.path)) {
      if (byPath.has(a)) continue;
      const st = live.stat(a);
      if (st !== null && st.isDirectory()) continue;
      if (st !== null) throw new StagedrootError('APPLY_FAILED', `Cannot apply ${c.path} live: its parent ${a} is not a directory in the running root`, { path: a, errno: 'ENOTDIR' });
      if (source.stat(a)?.isDirectory() !== true) throw new StagedrootError('APPLY_FAILED', `Cannot apply ${c.path} live: its parent ${a} is not a directory in the staged tree`, { path: a, errno: 'ENOTDIR' });
      byPath.set(a, { path: a, change: 'write' });
    }
  }
  return [...byPath.values()].sort((x, y) => comparePaths(x.path, y.path));
}

/** What is at `p` in the running root, its copy made durably at `image` (beside the journal). */
function captureOne(dfs: DurableFs, live: ReadOnlyTree, source: ReadOnlyTree, dir: string, c: LiveChange, image: string): BeforeImage {
  const r = live.resolve(c.path);
  if (r === null || r.stat === null) return { kind: 'absent' };
  const st = r.stat;
  const owner = { uid: st.uid, gid: st.gid, xattrs: readXattrs(r.hostPath).map(([name, v]) => ({ name, value: Buffer.from(v).toString('base64') })) };
  const host = imagePath(dir, image);
  if (st.isFile()) {
    copyOut(r.hostPath, host, { faults: dfs.faults });
    return { kind: 'file', mode: st.mode & 0o7777, ...owner, size: st.size, sha256: hashFile(host), image };
  }
  if (st.isSymbolicLink()) {
    copyOut(r.hostPath, host, { faults: dfs.faults });
    return { kind: 'symlink', ...owner, target: live.readlink(c.path) ?? '', image };
  }
  if (st.isDirectory()) {
    // Everything below comes along when the apply takes the directory away (a removal, a non-directory over it).
    const recursive = c.change === 'remove' || source.lstat(c.path)?.isDirectory() !== true;
    copyOut(r.hostPath, host, { recursive, faults: dfs.faults });
    return { kind: 'dir', mode: st.mode & 0o7777, ...owner, recursive, image };
  }
  throw new StagedrootError('UNSAFE_ENTRY', `Cannot apply ${c.path} live: it is a socket, FIFO or device node in the running root, which a before-image cannot keep`, { path: c.path, resolvedPath: r.hostPath });
}

/**
 * Writes the intent journal of a live apply, durably, before anything in the running root
 * changes: the before-image of every path (copied into `dir/before/N`, each durable), then
 * journal.json naming them (its rename is the point from which recovery undoes). No progress
 * yet. A directory holding an earlier journal is refused (recover it first); one holding
 * only images (an earlier prepare cut short) is cleared and started again.
 */
export function prepareJournal(o: PrepareOptions): LiveJournal {
  if (exists(journalFile(o.dir))) {
    throw new StagedrootError('INVALID_TRANSITION', `A live apply's journal is already in ${o.dir}: recover it (open the sysroot) before another live apply`, { path: journalFile(o.dir) });
  }
  o.dfs.removeTree(o.dir);
  o.dfs.mkdir(path.dirname(o.dir));
  o.dfs.mkdir(o.dir, 0o700);
  o.dfs.mkdir(path.join(o.dir, IMAGES_DIR), 0o700);
  const live = new ReadOnlyTree(o.root);
  const source = new ReadOnlyTree(o.source);
  const entries: JournalEntry[] = plannedChanges(live, source, o.changes).map((c, i) => ({ ...c, before: captureOne(o.dfs, live, source, o.dir, c, `${IMAGES_DIR}/${i}`) }));
  const j: LiveJournal = {
    version: JOURNAL_VERSION,
    deployment: o.deployment,
    source: o.source,
    root: o.root,
    entries,
    daemonReload: o.daemonReload,
    actions: [...o.actions],
    ...(o.services ? { services: [...o.services] } : {}),
    ...(o.bootId ? { bootId: o.bootId } : {}),
    progress: { filesWritten: false, daemonReloaded: false, actionsDone: 0 },
  };
  writeJournal(o.dfs, o.dir, j);
  return j;
}
