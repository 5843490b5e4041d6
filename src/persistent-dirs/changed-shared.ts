import { StagedrootError } from '../errors.js';
import { hostPath } from '../fs/core/names.js';
import { lstatOrNull } from '../fs/trees/copy-entry.js';
import { RootFs } from '../fs/trees/root-fs.js';
import { readEntry } from '../fs/manifests/manifest.js';
import { sameEntry } from '../fs/manifests/same-entry.js';
import type { Layout } from '../state/layout.js';
import { sharedRootOf } from './config.js';
import type { SharedOp } from './ops.js';

/**
 * The tree paths an update's shared-directory ops would change in the live shared
 * directories (what the activation decision must see: they are written at finalize, and
 * by a live apply at its commit): initial content only where nothing is there, a desired
 * entry where the live one differs, a removal where something is there. `content` is where
 * the ops' entries are (deploy/ID/shared), or null when they cannot be read from disk (a dry
 * run's overlay): then every desired entry counts as a change.
 */
export function changedSharedPaths(layout: Layout, ops: readonly SharedOp[], shared: readonly string[], content: string | null): string[] {
  const out: string[] = [];
  for (const op of ops) {
    const d = sharedRootOf(op.path, shared);
    if (d === null || d === op.path) continue;
    const live = liveEntry(new RootFs(layout.shared(d)), op.path.slice(d.length + 1));
    if (op.op === 'remove' || op.when === 'absent') {
      if ((live !== null) === (op.op === 'remove')) out.push(op.path);
      continue;
    }
    if (live === null || content === null) {
      out.push(op.path);
      continue;
    }
    const wantHost = hostPath(content, op.path);
    const want = lstatOrNull(wantHost);
    if (want === null || !sameEntry(readEntry(op.path, wantHost, want), readEntry(op.path, live.host, live.st))) out.push(op.path);
  }
  return out;
}

/** The live entry inside a shared directory, resolved chroot-style; null when absent or a parent is not a directory. */
function liveEntry(root: RootFs, rel: string): { st: NonNullable<ReturnType<RootFs['lstat']>>; host: string } | null {
  try {
    const r = root.resolve(rel);
    return r.stat === null ? null : { st: r.stat, host: r.hostPath };
  } catch (err) {
    if (err instanceof StagedrootError && (err.errno === 'ENOENT' || err.errno === 'ENOTDIR')) return null;
    throw err;
  }
}
