import { changedSharedPaths } from '../persistent-dirs/changed-shared.js';
import type { Context } from '../context.js';
import { StagedrootError, type Issue } from '../errors.js';
import type { PathChange } from '../fs/manifests/diff-manifests.js';
import { OverlayIo } from '../fs/trees/overlay-io.js';
import { changedPaths, changesOf, deltaOf, readOnDisk, type TreeChanges } from '../fs/manifests/patch-manifest.js';
import { comparePaths } from '../fs/core/paths.js';
import { walkEntries } from '../fs/core/walk.js';
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { RootFs } from '../fs/trees/root-fs.js';
import { B } from '../fs/trees/tree-io.js';
import { compareEntry } from '../fs/manifests/verify-tree.js';
import { sharedDirs } from '../persistent-dirs/config.js';
import { settleMountPoints } from '../persistent-dirs/mount-points.js';
import type { Source } from '../sources/source.js';
import { mustFind, stageBase } from '../state/model.js';
import type { BaseState, DeploymentRecord, Origin, SignatureRecord } from '../state/schema.js';
import { resolveBuiltins, runBuiltins, type BuiltinOptions } from '../validate/builtins.js';
import { checkFreeSpace } from '../validate/free-space.js';
import { applyUpdate } from './build-tree.js';
import { activationOf } from './activation-of.js';
import type { Activation } from '../state/activation.js';
import { checkStage, copyPolicyFor, DEFAULT_COPY_POLICY, labelBeforeCheck, planChanges, spaceEstimate, stageDisruptionPolicy, stageDivert, stagedKernelArguments } from './stage-plan.js';

export interface DryRunOptions {
  label?: string;
  builtins?: BuiltinOptions;
  signature?: string;
  /** A MachineConfiguration whose node disruption policies decide the activation (as for stage). */
  disruptionPolicy?: string;
}

export interface DryRunResult {
  /** False when the stage would be rejected (the issues say why). */
  ok: boolean;
  /** The deployment the update would be built from (the booted one). */
  base: string;
  label: string;
  description?: string;
  /** What the update would add, remove and modify, in the `diff` format. */
  changes: PathChange[];
  /** The paths the stage would change, as `stage --json` lists them (its `delta`). */
  delta: string[];
  /** Why the stage would be rejected. */
  issues: Issue[];
  /** What the stage would warn about (unknown fields, a unit missing from the tree, …). */
  warnings: Issue[];
  /** The image is what the booted deployment already runs: a stage would do nothing. */
  alreadyRunning?: boolean;
  origin?: Origin;
  signature?: SignatureRecord | null;
  /** How the staged deployment could become active (live or at a reboot), as the stage would record it. */
  activation?: Activation;
}

/**
 * Plans a stage without writing or recording anything, by running the stage's own steps
 * (check, plan, free-space preflight, apply, the built-in checks that read the tree)
 * over an in-memory layer on the booted tree (OverlayIo): the same RootFs decisions,
 * the same unit links, the same warnings, so the dry run cannot drift from the stage.
 * Not run: pre-stage hooks and command validators (programs with effects of their
 * own), `systemd-analyze verify` (it needs a tree on disk), and the check for
 * local changes that finalize could not merge. The cost follows the update: the
 * booted tree is read only where the update looks.
 */
export async function dryRun(ctx: Context, state: BaseState, source: Source, o: DryRunOptions = {}): Promise<DryRunResult> {
  const { layout } = ctx;
  const base = mustFind(state, stageBase(state));
  const tree = layout.tree(base.id);
  const result: DryRunResult = { ok: true, base: base.id, label: labelBeforeCheck(o), changes: [], delta: [], issues: [], warnings: [] };
  const builtins = resolveBuiltins(o.builtins);
  try {
    // Stage's own plan (stage-plan.ts): the same identity check, already-running test and labels.
    const checked = await checkStage(layout, base, source, o);
    result.signature = checked.checked.signature;
    if (checked.checked.info.origin) result.origin = checked.checked.info.origin;
    result.label = checked.label;
    if (checked.alreadyRunning) return { ...result, alreadyRunning: true };
    const { changes: cs, label } = await planChanges(layout, base, source, checked, o);
    result.label = label;
    result.description = cs.description;
    if (builtins.freeSpace) {
      // The stage's own estimate, with the copy policy it would use for this change set.
      const estimate = await spaceEstimate(layout, ctx.storage, base, copyPolicyFor(DEFAULT_COPY_POLICY, cs), cs);
      checkFreeSpace(layout.root, estimate, builtins.freeSpace);
    }

    const io = new OverlayIo(tree);
    const shared = sharedDirs(state);
    const contentRoot = `${layout.work('dry-run')}/shared`; // a name only: its overlay starts empty and reads no disk
    const divert = stageDivert(ctx, state, cs, contentRoot, new RootFs(contentRoot, { io: new OverlayIo(contentRoot, { empty: true }), durability: 'deferred' }));
    const applied = await applyUpdate(ctx, tree, { changes: cs, io, divert: (op, root) => divert.divert(op, root), settle: (root) => settleMountPoints(root, shared) });
    const ch = changesOf(tree, applied.events, (rel) => io.entry(rel, hostOf(tree, rel)));
    const delta = deltaOf(ch, 0);
    result.changes = diffOf(tree, ch, io);
    result.delta = wholeImage(checked.checked.info.origin, base)
      ? // An image that replaces the tree: the stage records what differs from the base manifest (every path of the diff).
        result.changes.map((c) => c.path)
      : // As the stage's delta records the base lines a removal dropped (RemovedLines): the
        // topmost booted path of each removed run, the paths below it left out.
        changedPaths({ delta: delta.delta, removed: [...new Set([...delta.removed, ...topmostRemoved(result.changes)])] });
    result.warnings.push(...applied.warnings);
    const policy = stageDisruptionPolicy(layout, base, o);
    const next = { origin: checked.checked.info.origin, kernelArguments: stagedKernelArguments(base, cs) };
    const changed = result.changes.map((c) => c.path);
    result.activation = activationOf({ base, next, changed: () => changed, sharedChanged: () => changedSharedPaths(layout, divert.ops, shared, null), baseTree: new ReadOnlyTree(tree), newTree: new ReadOnlyTree(tree, io), policy });

    // The built-in checks that read the new tree, reading it through the layer.
    const staged = new ReadOnlyTree(tree, io);
    const issues = await runBuiltins({ ...builtins, systemdVerify: null, freeSpace: null }, { tree, staged, base: new ReadOnlyTree(tree), baseTree: tree, id: `${base.id}+dry-run`, label: result.label, manifest: layout.manifest(base.id), delta: delta.delta });
    result.warnings.push(...issues.filter((i) => i.severity === 'warning'));
    const errors = issues.filter((i) => i.severity === 'error');
    if (errors.length > 0) {
      result.ok = false;
      result.issues.push(...errors);
    }
  } catch (err) {
    if (!(err instanceof StagedrootError) || err.code === 'USAGE' || !(err.isRejection || err.code === 'NO_SPACE')) throw err;
    result.ok = false;
    result.issues.push(...err.issues.filter((i) => i.severity === 'error'));
    if (result.issues.length === 0) result.issues.push({ code: err.code, path: err.path ?? '', message: err.message, severity: 'error' });
  }
  return result;
}

const hostOf = (tree: string, rel: string): string => (rel === '' ? tree : `${tree}/${rel}`);

/**
 * What `diff` would list between the booted tree and the new one: every path the apply
 * touched or removed (and what was below a removed directory), compared entry by entry
 * as diffManifests compares manifest lines.
 */
function diffOf(tree: string, ch: TreeChanges, io: OverlayIo): PathChange[] {
  const booted = new ReadOnlyTree(tree);
  const paths = new Set(ch.dirty);
  // Everything below a removed directory (the one walker, walk.ts: names kept as bytes).
  const below = (rel: string): void => walkEntries(B(booted.resolve(rel)!.hostPath), { enter: (r, _h, e) => (paths.add(`${rel}/${r}`), e.dirent.isDirectory()) });
  for (const r of ch.removed) if (booted.lstat(r)?.isDirectory()) below(r);
  const out: PathChange[] = [];
  for (const p of [...paths].sort(comparePaths)) {
    const before = readOnDisk(tree, p);
    const after = io.entry(p, hostOf(tree, p));
    if (before === null && after !== null) out.push({ path: p, change: 'added' });
    else if (before !== null && after === null) out.push({ path: p, change: 'removed' });
    else if (before !== null && after !== null) {
      const d = compareEntry(before, after);
      if (d.length > 0) out.push({ path: p, change: 'modified', what: d.map((k) => k.kind) });
    }
  }
  return out;
}

/** The topmost path of each removed run of a diff (its parent not removed too). */
function topmostRemoved(changes: readonly PathChange[]): string[] {
  const gone = new Set(changes.filter((c) => c.change === 'removed').map((c) => c.path));
  return [...gone].filter((p) => !gone.has(p.slice(0, Math.max(0, p.lastIndexOf('/')))));
}

/**
 * An OCI image staged over a base that is not one (no layers in its origin): the stage
 * builds the whole tree from the layer store and records as its delta the diff of the
 * manifests (build-tree.ts: snapshotManifest's deltaAgainstBase), not the events of the writes. Over an image
 * base the stage may start from the base's usr/ (where the store.s layers allow, which
 * the dry run does not read) and narrows the delta outside usr/: there the dry run's
 * delta is the writes' and may list paths rewritten as they were.
 */
function wholeImage(origin: { kind: string } | undefined, base: DeploymentRecord): boolean {
  return origin?.kind === 'oci-image' && !(base.origin?.kind === 'oci-image' && (base.origin.layers?.length ?? 0) > 0);
}
