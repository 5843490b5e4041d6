import { readFileChunks, readTree, type TreeEntryKind } from '../fs/trees/read-tree.js';
import type { LayerEntry, LayerEntryKind, LayerReader } from './layer/entry.js';
import { planLayer, type LayerOptions } from './layer/plan.js';
import type { Source } from './source.js';

export type DirectorySourceOptions = LayerOptions;

const KINDS: Record<TreeEntryKind, LayerEntryKind> = {
  file: 'file',
  dir: 'dir',
  symlink: 'symlink',
  'char-device': 'char-device',
  'block-device': 'block-device',
  fifo: 'fifo',
  socket: 'socket',
};

const TYPE_NAMES: Record<TreeEntryKind, string> = {
  file: 'regular file',
  dir: 'directory',
  symlink: 'symbolic link',
  'char-device': 'character device',
  'block-device': 'block device',
  fifo: 'FIFO',
  socket: 'socket',
};

/**
 * A directory applied like an uncompressed layer: the same checks, the same OCI
 * semantics (`.wh.` whiteouts included), the same two streamed passes. Files with
 * several links inside the directory become one file and hardlinks to it.
 */
export function directorySource(p: string, o: DirectorySourceOptions = {}): Source {
  const where = `directory ${p}`;
  return {
    kind: 'directory',
    describe: where,
    plan: () => planLayer(directoryReader(p, where), o),
  };
}

function directoryReader(root: string, where: string): LayerReader {
  return {
    where,
    async *entries() {
      // Only inodes with more than one link are remembered, to turn repeats into hardlinks.
      const firstPathOf = new Map<string, string>();
      for (const t of readTree(root)) {
        const e: LayerEntry = { path: t.rel, kind: KINDS[t.kind], typeName: TYPE_NAMES[t.kind], size: t.size, mode: t.mode, uid: t.uid, gid: t.gid, mtime: t.mtime };
        if (t.kind === 'symlink') e.linkpath = t.linkTarget;
        if (t.xattrs !== undefined) e.xattrs = t.xattrs;
        if (t.kind === 'file') {
          const first = t.nlink > 1 ? firstPathOf.get(t.inode) : undefined;
          if (first !== undefined) {
            e.kind = 'hardlink';
            e.typeName = 'hard link';
            e.linkpath = first;
            e.size = 0;
          } else {
            if (t.nlink > 1) firstPathOf.set(t.inode, t.rel);
            e.open = () => readFileChunks(t.host, t.rel, t.size);
          }
        }
        yield e;
      }
    },
  };
}
