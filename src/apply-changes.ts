import type { ChangeOp, ChangeSet, SharedContent } from './changeset.js';
import { StagedrootError, type Issue } from './errors.js';
import type { RootFs } from './fs/trees/root-fs.js';
import { performance } from 'node:perf_hooks';

export interface ApplyProgress {
  done: number;
  total: number | null;
  bytes: number;
}

export interface ApplyOptions {
  /**
   * Where a write whose content is a layer store file (`linkFrom`) may hardlink it: the
   * real tree path it lands at. Absent, or false there: the content is written (copied).
   */
  linkAt?: (rel: string) => boolean;
}

/** Applies one operation through the safe-fs layer. */
export async function applyOp(root: RootFs, op: ChangeOp, o: ApplyOptions = {}): Promise<number> {
  switch (op.op) {
    case 'write': {
      const attrs = { mode: op.mode, uid: op.uid, gid: op.gid, mtime: op.mtime, overwrite: op.overwrite, replace: op.replace, xattrs: op.xattrs };
      if (op.content.kind === 'stream' && op.content.linkFrom !== undefined && o.linkAt !== undefined && !op.append && op.overwrite !== false) {
        // The store's file has this content and these attributes (its object key covers them): linked, or copied from it.
        root.linkFrom(op.path, op.content.linkFrom.file, { replace: op.replace, linkAt: o.linkAt, sha256: op.content.linkFrom.sha256, explicitLabel: op.xattrs?.some(([n]) => n === 'security.selinux') === true });
        return op.content.size ?? 0;
      }
      if (op.append) {
        const data = op.content.kind === 'bytes' ? op.content.data : await collect(op.content.open());
        root.appendFile(op.path, data, attrs);
        return data.length;
      }
      if (op.content.kind === 'bytes') {
        root.writeFile(op.path, op.content.data, attrs);
        return op.content.data.length;
      }
      return root.writeFileFromStream(op.path, op.content.open(), attrs);
    }
    case 'mkdir':
      root.mkdir(op.path, { mode: op.mode, uid: op.uid, gid: op.gid, mtime: op.mtime, replace: op.replace, xattrs: op.xattrs });
      return 0;
    case 'symlink':
      root.symlink(op.path, op.target, { uid: op.uid, gid: op.gid, overwrite: op.overwrite, replace: op.replace, xattrs: op.xattrs });
      return 0;
    case 'hardlink':
      root.link(op.path, op.target, { overwrite: op.overwrite, replace: op.replace });
      return 0;
    case 'remove':
      root.remove(op.path, { recursive: op.recursive, missingOk: op.missingOk });
      return 0;
    case 'clear':
      root.clearDirectory(op.path);
      return 0;
    case 'setattr':
      root.setAttrs(op.path, { mode: op.mode, uid: op.uid, gid: op.gid, mtime: op.mtime });
      return 0;
  }
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c);
  return Buffer.concat(parts);
}

/**
 * Applies a change set in order; an error names the operation and its path. `divert`
 * takes the ops it handles elsewhere (returning their bytes) and null for the rest;
 * `mode` tells it what entries under shared directories mean when not the stage's
 * own change set's (a `onTop` change set's).
 */
export async function applyChanges(root: RootFs, cs: ChangeSet, onProgress?: (p: ApplyProgress) => void, divert?: (op: ChangeOp, root: RootFs, mode?: SharedContent) => Promise<number | null>, mode?: SharedContent, o: ApplyOptions = {}): Promise<{ ops: number; bytes: number; warnings: Issue[] }> {
  let done = 0;
  let bytes = 0;
  let lastYield = performance.now();
  for await (const op of cs.ops as AsyncIterable<ChangeOp>) {
    // Each operation is a few synchronous calls: give the caller's event loop a turn
    // every 10 ms, so that a large change set never holds it for long.
    if (performance.now() - lastYield > 10) {
      await new Promise((resolve) => setImmediate(resolve));
      lastYield = performance.now();
    }
    try {
      // An op under a shared directory is set aside for finalize (never written into the tree).
      const diverted = divert ? await divert(op, root, mode) : null;
      bytes += diverted ?? (await applyOp(root, op, o));
    } catch (err) {
      if (err instanceof StagedrootError) {
        if (err.path === undefined) (err as { path?: string }).path = op.path;
        throw err;
      }
      throw new StagedrootError('APPLY_FAILED', `Cannot apply ${op.op} ${op.path}: ${(err as Error).message}`, { path: op.path, cause: err });
    }
    done += 1;
    if (onProgress && (done % 100 === 0)) onProgress({ done, total: cs.count ?? null, bytes });
  }
  const warnings = [...(cs.warnings ?? [])];
  if (cs.onTop) {
    // Planned now, against the tree the ops built (a config over its OS image).
    const top = await cs.onTop(root.readOnly());
    const next = await applyChanges(root, top, onProgress, divert, top.sharedContent ?? 'initial', o);
    done += next.ops;
    bytes += next.bytes;
    warnings.push(...next.warnings);
  }
  warnings.push(...((cs.finish ? await cs.finish(root) : undefined) ?? []));
  onProgress?.({ done, total: cs.count ?? done, bytes });
  return { ops: done, bytes, warnings };
}
