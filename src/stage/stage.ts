import type { Context } from '../context.js';
import { StagedrootError, formatIssues, type Issue } from '../errors.js';
import { copyTree, type CopyPolicy } from '../fs/copy-tree.js';
import { freeSpace, listDir, syncFilesystem, writeJson, fileSha256 } from '../fs/durable.js';
import { copiedBytes, formatBytes, isNoSpace, noSpaceError } from '../fs/space.js';
import { patchManifest } from '../fs/patch-manifest.js';
import { RootFs, type TouchEvent } from '../fs/root-fs.js';
import { applyTransition } from '../commit/apply-transition.js';
import { mustFind, nextId, stageFailed, stageSucceeded } from '../state/model.js';
import type { BaseState, DeploymentRecord, Failure, Phase } from '../state/schema.js';
import type { Source } from '../sources/source.js';
import type { ChangeOp, ChangeSet } from '../changeset.js';
import { runValidators } from '../validate/run-validators.js';
import type { Validator } from '../validate/types.js';
import { applyChanges } from './apply-changes.js';

export interface StageProgress {
  phase: 'plan' | 'copy' | 'apply' | 'manifest' | 'validate' | 'sync' | 'commit';
  done: number;
  total: number | null;
  bytes: number;
}

export interface StageOptions {
  label?: string;
  validators?: readonly Validator[];
  /** How the new tree is built from the booted one (default: hardlink usr/, reflink the rest). */
  copyPolicy?: Partial<CopyPolicy>;
  onProgress?: (p: StageProgress) => void;
  /** Finalization lock: finalize leaves this deployment staged until `unlock`. */
  lock?: boolean;
  /** Called with the staged tree before validation (used by built-in checks that need setup). */
  signal?: AbortSignal;
}

export interface StageResult {
  id: string;
  label: string;
  path: string;
  delta: string[];
  warnings: Issue[];
  entries: number;
  bytes: number;
}

export const DEFAULT_COPY_POLICY: CopyPolicy = { hardlinkPrefixes: ['usr'], mode: 'reflink' };

/**
 * Builds, validates and records a new staged deployment from the booted one. Nothing
 * outside work/ID is written until the tree is complete, validated and durable; then
 * one rename moves it into deploy/ and one atomic state write stages it. Any failure
 * leaves the booted, current and rollback trees untouched and is recorded in
 * lastFailure (phase, reason, issues); the tree of a rejected update is kept for
 * diagnosis.
 */
export async function stage(ctx: Context, state: BaseState, source: Source, opts: StageOptions = {}): Promise<StageResult> {
  const { layout, dfs } = ctx;
  const baseId = state.booted ?? state.current;
  const base = mustFind(state, baseId);
  const id = nextId([...state.deployments.map((d) => d.id), ...listDir(layout.deployDir), ...listDir(layout.workDir)]);
  const work = layout.work(id);
  const tree = `${work}/tree`;
  let label = opts.label ?? 'update';
  const progress = opts.onProgress ?? (() => {});
  let phase: Phase = 'apply';
  let treeBuilt = false;

  const fail = (err: StagedrootError, keepTree: boolean): never => {
    const failure: Failure = {
      id,
      label,
      phase,
      reason: err.message,
      at: ctx.now().toISOString(),
      code: err.code,
      ...(err.path === undefined ? {} : { path: err.path }),
      ...(err.issues.length ? { issues: err.issues } : {}),
    };
    let rec: DeploymentRecord | null = null;
    if (keepTree && treeBuilt) {
      dfs.rename(work, layout.deployment(id));
      rec = record(id, label, baseId, ctx, 'failed', failure, 0, 0, null, source.describe);
    } else {
      dfs.removeTree(work);
    }
    applyTransition(ctx, state, stageFailed(state, failure, rec), 'stage-failed');
    throw err;
  };

  const policy = { ...DEFAULT_COPY_POLICY, ...opts.copyPolicy };
  let freeBefore: number | null = null;
  let cs: ChangeSet | null = null;
  try {
    progress({ phase: 'plan', done: 0, total: null, bytes: 0 });
    cs = await source.plan({ root: layout.tree(baseId), readFile: (p) => new RootFs(layout.tree(baseId)).readFile(p) });
    label = opts.label ?? cs.label ?? label;

    freeBefore = freeSpace(layout.root).free;
    dfs.mkdir(layout.workDir);
    dfs.mkdir(work);
    dfs.mkdir(tree);
    const copied = copyTree({
      src: layout.tree(baseId),
      dst: tree,
      policy,
      srcManifest: layout.manifest(baseId),
      manifestOut: `${work}/manifest.pre.ndjson`,
      faults: ctx.faults,
      total: base.entries,
      onProgress: (p) => progress({ phase: 'copy', ...p }),
      onSkip: (rel, why) => ctx.warn(`skipped ${rel}: ${why}`),
    });
    treeBuilt = true;

    const events: TouchEvent[] = [];
    const root = new RootFs(tree, { faults: ctx.faults, durability: 'deferred', onTouch: (e) => events.push(e) });
    const applied = await applyChanges(root, cs, (p) => progress({ phase: 'apply', ...p }));

    progress({ phase: 'manifest', done: 0, total: null, bytes: 0 });
    const { delta, entries } = patchManifest(tree, `${work}/manifest.pre.ndjson`, `${work}/manifest.ndjson`, events);
    dfs.unlink(`${work}/manifest.pre.ndjson`);
    writeJson(dfs, `${work}/delta.json`, delta);

    phase = 'validate';
    progress({ phase: 'validate', done: 0, total: opts.validators?.length ?? 0, bytes: 0 });
    const result = await runValidators(opts.validators ?? [], { tree, id, label, manifest: `${work}/manifest.ndjson`, delta, signal: opts.signal });
    const errors = result.issues.filter((i) => i.severity === 'error');
    if (errors.length > 0) {
      throw new StagedrootError('VALIDATION_FAILED', `Validation rejected deployment ${id} (${label}) with ${errors.length} error${errors.length === 1 ? '' : 's'}:\n${formatIssues(errors)}`, { issues: result.issues, path: errors[0]!.path });
    }

    phase = 'apply';
    progress({ phase: 'sync', done: 0, total: null, bytes: 0 });
    await syncFilesystem(work);
    dfs.rename(work, layout.deployment(id));
    const rec = record(id, label, baseId, ctx, 'ready', null, entries, copied.bytes + applied.bytes, fileSha256(layout.manifest(id)), cs.description);
    rec.locked = opts.lock ?? false;
    progress({ phase: 'commit', done: 0, total: null, bytes: 0 });
    applyTransition(ctx, state, stageSucceeded(state, rec), 'stage');
    return { id, label, path: layout.tree(id), delta, warnings: result.issues.filter((i) => i.severity === 'warning'), entries: rec.entries, bytes: rec.bytes };
  } catch (err) {
    let e = err instanceof StagedrootError ? err : new StagedrootError('IO', (err as Error)?.message ?? String(err), { cause: err });
    if (isNoSpace(err)) {
      // The figures, before the work tree is removed: what the copy needs, what was free.
      let copied: number | null = null;
      try {
        copied = copiedBytes(layout.manifest(baseId), policy.hardlinkPrefixes);
      } catch {
        // an unreadable base manifest: say "more space"
      }
      const update = cs === null ? null : updateBytes(cs);
      const linked = policy.hardlinkPrefixes.length ? `hardlinking ${policy.hardlinkPrefixes.map((p) => `${p}/`).join(', ')}` : 'hardlinking nothing';
      const why = `${copied === null ? '?' : formatBytes(copied)} of the base tree its copy policy copies (${linked}) and ${update === null ? "the update's own data" : `${formatBytes(update)} of update data`}`;
      e = noSpaceError(err, { what: `staging deployment ${id} (${label})`, dir: layout.root, freeBefore: freeBefore ?? freeSpace(layout.root).free, needed: copied === null ? null : copied + (update ?? 0), neededWhy: why });
    }
    // The update's own fault: keep its tree for diagnosis. A machine fault (disk full, I/O): free the space.
    return fail(e, e.isRejection);
  }
}

/** Bytes an update writes, when its operations are a list with known sizes (null otherwise). */
function updateBytes(cs: ChangeSet): number | null {
  if (!Array.isArray(cs.ops)) return null;
  let n = 0;
  for (const op of cs.ops as ChangeOp[]) {
    if (op.op !== 'write') continue;
    if (op.content.kind === 'bytes') n += op.content.data.length;
    else if (op.content.size !== undefined) n += op.content.size;
    else return null;
  }
  return n;
}

function record(id: string, label: string, parent: string, ctx: Context, status: 'ready' | 'failed', failure: Failure | null, entries: number, bytes: number, manifestSha256: string | null, source: string): DeploymentRecord {
  return { id, label, createdAt: ctx.now().toISOString(), parent, status, good: false, triesLeft: null, pinned: false, locked: false, entries, bytes, manifestSha256, source, failure };
}
