import * as path from 'node:path';
import { listDir, lstatPath } from '../../fs/core/host-paths.js';
import type { FaultHook } from '../../fs/core/faults.js';
import { hostPath } from '../../fs/core/names.js';
import { RootFs } from '../../fs/trees/root-fs.js';
import { imagePath, type JournalEntry } from './journal.js';

/*
 * The writes of a live apply into the running root, and their undo, both through RootFs
 * (chroot resolution, O_NOFOLLOW, temp + fsync + rename + fsync of the directory): every
 * written file is a new inode, so a deployment sharing the old one by a hardlink never
 * sees the change. Modes, owners and extended attributes (the SELinux label the staged
 * tree's policy gave the entry among them) come from the staged tree, as at a reboot.
 */

/** Copies a host tree (an entry and, for a directory, everything below it) to `p` in the root. */
function copyInTree(root: RootFs, p: string, src: string): void {
  root.copyIn(p, src, { replace: true });
  if (lstatPath(src)?.isDirectory() !== true) return;
  for (const name of listDir(src)) copyInTree(root, `${p}/${name}`, path.join(src, name));
}

/** Writes the journal's entries into the running root, in order (a parent before its children). */
export function writeEntries(rootDir: string, sourceDir: string, entries: readonly JournalEntry[], faults?: FaultHook): void {
  const root = new RootFs(rootDir, { faults });
  for (const e of entries) {
    if (e.change === 'remove') root.remove(e.path, { recursive: true, missingOk: true });
    else root.copyIn(e.path, hostPath(sourceDir, e.path), { replace: true });
  }
}

/**
 * Puts every entry back as its before-image has it, children before their parents:
 * what the apply created is removed, what it replaced or removed comes back with its
 * bytes, mode, owner and attributes. Idempotent: recovery runs it again after a crash.
 */
export function restoreEntries(rootDir: string, journalDir: string, entries: readonly JournalEntry[], faults?: FaultHook): void {
  const root = new RootFs(rootDir, { faults });
  for (const e of [...entries].reverse()) {
    const b = e.before;
    if (b.kind === 'absent') {
      root.remove(e.path, { recursive: true, missingOk: true });
      continue;
    }
    const image = imagePath(journalDir, b.image);
    if (b.kind === 'dir' && !b.recursive) {
      // Its children are entries of their own (or untouched): only the directory itself comes back.
      const st = root.lstat(e.path);
      if (st !== null && !st.isDirectory()) root.remove(e.path, { recursive: true });
      root.copyIn(e.path, image, { replace: true });
      continue;
    }
    root.remove(e.path, { recursive: true, missingOk: true });
    copyInTree(root, e.path, image);
  }
}
