import type { ChangeOp, ChangeSet } from '../../changeset.js';
import { StagedrootError, formatIssues, type Issue } from '../../errors.js';
import { DEFAULT_LAYER_LIMITS, type LayerLimits } from './entry-checks.js';
import { LayerChecker } from './checker.js';
import type { LayerReader } from './entry.js';

export interface LayerOptions {
  /**
   * Take the layer as the whole new tree (CLI `--replace`): everything not in it is
   * removed. Whiteouts mean nothing then and are skipped.
   */
  replace?: boolean;
  /** Caps against bombs; defaults in DEFAULT_LAYER_LIMITS. */
  limits?: Partial<LayerLimits>;
}

/** Entries rejected per layer before the rest is not looked at any more. */
const MAX_ISSUES = 50;

/**
 * Turns a layer into a change set in two streamed passes over the same reader:
 *
 * 1. `plan` reads every entry's header (bodies are skipped, not held) and checks it
 *    with a LayerChecker. Every unsafe entry is collected; if any, the whole layer is
 *    rejected before a single write. Limits (bytes, entries) stop the read at once.
 *    What pass 2 needs up front is kept: the whiteouts and opaque directories.
 * 2. The change set's `ops` is an async generator that reads the layer again. It first
 *    yields the deletions from the lower layers (whiteouts, opaque clears: they apply
 *    to lower layers only, wherever they sit in the archive, so doing them first
 *    cannot hit this layer's own entries), then one op per entry in archive order
 *    with `replace` (OCI: a directory over a directory keeps it, anything else is
 *    unlink then create), then each directory's final mode and mtime, deepest first
 *    (children change a directory's mtime, and a mode without u+wx would stop them).
 *    A file's `write` carries stream content that reads the entry's body straight from
 *    the reader: the generator is pulled one op at a time, so at most one entry's
 *    current chunk is in memory, and the reader only moves on once the op is applied.
 *    Pass 2 runs the same checks again, so a source that changed between the passes
 *    is refused (the tar reader also compares the file's identity), never applied unchecked.
 */
export async function planLayer(reader: LayerReader, o: LayerOptions = {}): Promise<ChangeSet> {
  const limits: LayerLimits = { ...DEFAULT_LAYER_LIMITS, ...o.limits };
  const checker = new LayerChecker(limits, reader.where);
  const issues: Issue[] = [];
  const errors: StagedrootError[] = [];
  const whiteouts: string[] = [];
  const opaques: string[] = [];
  let creates = 0;

  for await (const e of reader.entries()) {
    try {
      const p = checker.check(e);
      if (p.kind === 'whiteout') whiteouts.push(p.path);
      else if (p.kind === 'opaque') opaques.push(p.path);
      else if (p.kind !== 'skip') creates += 1;
    } catch (err) {
      // Limits are fatal (reading on is what a bomb wants); other problems are collected.
      if (!(err instanceof StagedrootError) || err.option !== undefined) throw err;
      errors.push(err);
      issues.push({ code: err.code, path: err.path ?? String(e.path), message: err.message, severity: 'error' });
      if (issues.length >= MAX_ISSUES) break;
    }
  }
  if (errors.length > 0) {
    const first = errors[0]!;
    const n = errors.length;
    const more = n >= MAX_ISSUES ? ` (stopped after ${MAX_ISSUES})` : '';
    const message = n === 1 ? `${reader.where} is rejected: ${first.message}` : `${reader.where} is rejected: ${n} unsafe entries${more}:\n${formatIssues(issues)}`;
    throw new StagedrootError(first.code, message, { path: first.path, issues, errno: first.errno, cause: first });
  }

  const dirCount = checker.dirs.size;
  const replace = o.replace === true;
  const lowerOps = replace ? 1 : whiteouts.length + opaques.length;
  const parts = [`${creates} entr${creates === 1 ? 'y' : 'ies'}`, `${checker.declaredBytes} bytes`];
  if (!replace && whiteouts.length + opaques.length > 0) parts.push(`${whiteouts.length} whiteout${whiteouts.length === 1 ? '' : 's'}, ${opaques.length} opaque`);
  return {
    description: `${reader.where}${replace ? ' (replacing the tree)' : ''}: ${parts.join(', ')}`,
    ops: applyOps(reader, limits, replace, whiteouts, opaques),
    count: lowerOps + creates + dirCount,
  };
}

async function* applyOps(reader: LayerReader, limits: LayerLimits, replace: boolean, whiteouts: string[], opaques: string[]): AsyncGenerator<ChangeOp> {
  if (replace) {
    yield { op: 'clear', path: '' };
  } else {
    for (const path of opaques) yield { op: 'clear', path };
    for (const path of whiteouts) yield { op: 'remove', path, recursive: true, missingOk: true };
  }
  const checker = new LayerChecker(limits, reader.where);
  for await (const e of reader.entries()) {
    const p = checker.check(e);
    switch (p.kind) {
      case 'skip':
      case 'whiteout':
      case 'opaque':
        break;
      case 'dir':
        // u+rwx while children are written; the real mode comes with the final setattr.
        yield { op: 'mkdir', path: p.path, mode: (p.mode ?? 0o755) | 0o700, uid: p.uid, gid: p.gid, replace: true, xattrs: p.xattrs };
        break;
      case 'file':
        yield { op: 'write', path: p.path, content: { kind: 'stream', size: p.size, open: p.open }, mode: p.mode ?? 0o644, uid: p.uid, gid: p.gid, mtime: p.mtime, replace: true, xattrs: p.xattrs };
        break;
      case 'symlink':
        yield { op: 'symlink', path: p.path, target: p.target, uid: p.uid, gid: p.gid, replace: true, xattrs: p.xattrs };
        break;
      case 'hardlink':
        yield { op: 'hardlink', path: p.path, target: p.target, replace: true };
        break;
    }
  }
  const dirs = checker.dirsDeepestFirst();
  for (const [path, a] of dirs) yield { op: 'setattr', path, mode: a.mode ?? 0o755, mtime: a.mtime };
}
