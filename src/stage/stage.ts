import type { Context } from '../context.js';
import { StagedrootError, formatIssues, type Issue } from '../errors.js';
import type { CopyPolicy } from '../fs/copy-tree.js';
import { freeSpace, listDir, syncFilesystem } from '../fs/durable.js';
import { runTreeTask } from '../fs/tree-jobs.js';
import { snapshotsFrom } from '../fs/storage.js';
import { RootFs } from '../fs/root-fs.js';
import { applyTransition } from '../commit/apply-transition.js';
import { mustFind, newRecord, nextId, stageBase, stageFailed, stageSucceeded } from '../state/model.js';
import type { BaseState, DeploymentRecord, Failure, Phase } from '../state/schema.js';
import { buildTree } from './build-tree.js';
import type { Source } from '../sources/source.js';
import type { ChangeSet } from '../changeset.js';
import { resolveBuiltins, type BuiltinOptions } from '../validate/builtins.js';
import { planCommandValidators, type CommandValidator } from '../validate/command-validators.js';
import { checkFreeSpace, estimateBytes, withSpaceFigures, type SpaceEstimate } from '../validate/free-space.js';
import type { Validator } from '../validate/types.js';
import { validateTree } from '../validate/validate-tree.js';

export interface StageProgress {
  phase: 'plan' | 'copy' | 'apply' | 'manifest' | 'validate' | 'sync' | 'commit';
  done: number;
  total: number | null;
  bytes: number;
}

export interface StageOptions {
  label?: string;
  validators?: readonly Validator[];
  /** Built-in checks (each on by default; `false` switches one off). */
  builtins?: BuiltinOptions;
  /** Executables that judge the staged tree (STAGEDROOT_TREE); output kept in the failure record. */
  commands?: readonly (CommandValidator | string)[];
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
  const baseId = stageBase(state);
  const base = mustFind(state, baseId);
  const id = nextId([state.lastId, ...state.deployments.map((d) => d.id), ...listDir(layout.deployDir), ...listDir(layout.workDir)]);
  const work = layout.work(id);
  const tree = `${work}/tree`;
  let label = opts.label ?? 'update';
  const progress = opts.onProgress ?? (() => {});
  let phase: Phase = 'apply';
  let treeBuilt = false;
  let output: string | undefined;
  const builtins = resolveBuiltins(opts.builtins); // bad options: USAGE, before anything is recorded
  planCommandValidators(opts.commands ?? []);

  const fail = async (err: StagedrootError, keepTree: boolean): Promise<never> => {
    const failure: Failure = {
      id,
      label,
      phase,
      reason: err.message,
      at: ctx.now().toISOString(),
      code: err.code,
      ...(err.path === undefined ? {} : { path: err.path }),
      ...(err.issues.length ? { issues: err.issues } : {}),
      ...(output === undefined ? {} : { output }),
    };
    let rec: DeploymentRecord | null = null;
    if (keepTree && treeBuilt) {
      // Kept for diagnosis: durable like any deployment, so a power loss cannot tear it.
      await syncFilesystem(work).catch(() => ctx.warn(`could not sync the failed tree ${work}`));
      dfs.rename(work, layout.deployment(id));
      rec = newRecord({ id, label, parent: baseId, at: ctx.now().toISOString(), source: source.describe, failure });
    } else {
      dfs.removeTree(work);
    }
    applyTransition(ctx, state, stageFailed(state, failure, rec), 'stage-failed');
    throw err;
  };

  const policy = { ...DEFAULT_COPY_POLICY, ...opts.copyPolicy };
  let cs: ChangeSet | undefined;
  let freeAtStart: number | null = null;
  let estimate: SpaceEstimate | null = null;
  try {
    progress({ phase: 'plan', done: 0, total: null, bytes: 0 });
    cs = await source.plan({ root: layout.tree(baseId), readFile: (p) => new RootFs(layout.tree(baseId)).readFile(p) });
    label = opts.label ?? cs.label ?? label;
    if (builtins.freeSpace) {
      phase = 'validate'; // the preflight is a built-in check, run before the tree is built
      estimate = await estimateBytes(layout.manifest(baseId), policy.hardlinkPrefixes, cs, { snapshot: snapshotsFrom(layout.root, ctx.storage, layout.tree(baseId)) });
      freeAtStart = checkFreeSpace(layout.root, estimate, builtins.freeSpace).free;
      phase = 'apply';
    } else {
      freeAtStart = freeSpace(layout.root).free; // one statfs, for the figures of an ENOSPC
    }

    dfs.mkdir(layout.workDir);
    const built = await buildTree(ctx, {
      work,
      from: { tree: layout.tree(baseId), manifest: layout.manifest(baseId), entries: base.entries, policy },
      changes: cs,
      onCopy: (p) => progress({ phase: 'copy', ...p }),
      onApply: (p) => progress({ phase: 'apply', ...p }),
      onTreeBuilt: () => void (treeBuilt = true),
      signal: opts.signal,
    });
    const { delta, entries } = built;
    progress({ phase: 'manifest', done: 0, total: null, bytes: 0 });

    phase = 'validate';
    progress({ phase: 'validate', done: 0, total: opts.validators?.length ?? 0, bytes: 0 });
    const vctx = { tree, id, label, manifest: built.manifest, delta, baseTree: layout.tree(baseId), signal: opts.signal };
    const result = await validateTree(vctx, { builtins, commands: opts.commands, validators: opts.validators });
    output = result.output;
    const errors = result.issues.filter((i) => i.severity === 'error');
    if (errors.length > 0) {
      throw new StagedrootError('VALIDATION_FAILED', `Validation rejected deployment ${id} (${label}) with ${errors.length} error${errors.length === 1 ? '' : 's'}:\n${formatIssues(errors)}`, { issues: result.issues, path: errors[0]!.path });
    }

    phase = 'apply';
    progress({ phase: 'sync', done: 0, total: null, bytes: 0 });
    await syncFilesystem(work);
    dfs.rename(work, layout.deployment(id));
    const manifestSha256 = await runTreeTask('hashFile', { file: layout.manifest(id) });
    const rec = newRecord({ id, label, parent: baseId, at: ctx.now().toISOString(), entries, bytes: built.bytes, manifestSha256, source: cs.description });
    rec.locked = opts.lock ?? false;
    progress({ phase: 'commit', done: 0, total: null, bytes: 0 });
    applyTransition(ctx, state, stageSucceeded(state, rec), 'stage');
    return { id, label, path: layout.tree(id), delta, warnings: result.issues.filter((i) => i.severity === 'warning'), entries: rec.entries, bytes: rec.bytes };
  } catch (err) {
    let e = err instanceof StagedrootError ? err : new StagedrootError('IO', (err as Error)?.message ?? String(err), { cause: err });
    if (e.code === 'NO_SPACE' && e.errno !== undefined) {
      // The filesystem ran out mid-way: say how much there was and how much it takes (before the partial tree goes).
      try {
        e = withSpaceFigures(e, layout.root, freeAtStart, estimate ?? (cs ? await estimateBytes(layout.manifest(baseId), policy.hardlinkPrefixes, cs) : null));
      } catch {
        // The figures are extra: without them the error still names the path and the errno.
      }
    }
    // The update's own fault: keep its tree for diagnosis. A machine fault (disk full, I/O): free the space.
    return fail(e, e.isRejection);
  }
}
