/**
 * The plan of a stage, shared by `stage` and `stage --dry-run` so the two cannot drift:
 * the source's identity (and signature), whether the base already runs it, then the
 * change set the source plans against the base tree, with the label they settle on.
 */
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import type { ChangeSet } from '../changeset.js';
import type { LayerStoreHandle, Source } from '../sources/source.js';
import type { ConfigRecord } from '../state/config-record.js';
import type { Layout } from '../state/layout.js';
import type { DeploymentRecord } from '../state/schema.js';
import { readConfigRecord } from '../store/config-record.js';
import { checkSource, type CheckedSource } from './check-source.js';
import type { CopyPolicy } from '../fs/trees/copy-tree.js';
import { snapshotsFrom, type StoragePreference } from '../fs/trees/storage.js';
import { estimateBytes, type SpaceEstimate } from '../validate/free-space.js';
import type { Context } from '../context.js';
import type { RootFs } from '../fs/trees/root-fs.js';
import type { DisruptionPolicy } from '../activation/policy.js';
import { sharedDirs } from '../persistent-dirs/config.js';
import { SharedDivert } from '../persistent-dirs/divert.js';
import type { BaseState } from '../state/schema.js';
import { applyKernelArguments } from '../state/kernel-args.js';
import { loadDisruptionPolicy } from './activation-of.js';

/** The label when nothing names one. */
const DEFAULT_LABEL = 'update';

/** The label before the source is read (what a failure there is recorded under): `--label`, else "update". */
export function labelBeforeCheck(o: { label?: string }): string {
  return o.label ?? DEFAULT_LABEL;
}

export interface CheckedStage {
  checked: CheckedSource;
  /** `--label`, else the source's own (an image's version label), else "update". */
  label: string;
  /** The image is what the base already runs (by digest), and no config comes with it: nothing to stage. */
  alreadyRunning: boolean;
  /**
   * An upgrade (`staged` given): the staged deployment, pulled from a registry, already holds
   * this image (by digest) and no config comes with it: nothing to stage. Null otherwise.
   */
  alreadyStaged: DeploymentRecord | null;
}

/**
 * The first half of the plan: the source's identity, read before anything else is.
 * `staged` is the staged deployment of the state read under the writer lock, given by an
 * upgrade: decided here, two upgrades of the same image cannot both stage it.
 */
export async function checkStage(layout: Layout, base: DeploymentRecord, source: Source, o: { label?: string; signature?: string }, staged?: DeploymentRecord | null): Promise<CheckedStage> {
  const checked = await checkSource(layout, source, { signature: o.signature });
  const origin = checked.info.origin;
  const same = (d: DeploymentRecord | null | undefined): boolean => origin !== undefined && !checked.info.withConfig && d?.origin?.digest === origin.digest;
  return {
    checked,
    label: o.label ?? checked.info.label ?? DEFAULT_LABEL,
    alreadyRunning: same(base),
    alreadyStaged: staged?.origin?.pullspec !== undefined && same(staged) ? staged : null,
  };
}

export interface PlannedChanges {
  changes: ChangeSet;
  /** The base's config record (what the config it came from owns), as the source saw it. */
  prior: ConfigRecord | null;
  /** `--label`, else the change set's, else what checkStage settled on. */
  label: string;
}

/** The second half: what the source would change in the base tree (it only reads it). */
export async function planChanges(layout: Layout, base: DeploymentRecord, source: Source, checked: CheckedStage, o: { label?: string }, layerStore?: LayerStoreHandle): Promise<PlannedChanges> {
  const prior = readConfigRecord(layout.deployment(base.id));
  const changes = await source.plan(new ReadOnlyTree(layout.tree(base.id)), { config: prior, ...(base.origin ? { origin: base.origin } : {}), ...(layerStore ? { layerStore } : {}) });
  return { changes, prior, label: o.label ?? changes.label ?? checked.label };
}

/** How a stage copies the base tree: its prefixes hardlinked, except where a command runs in the new tree. */
export const DEFAULT_COPY_POLICY: CopyPolicy = { hardlinkPrefixes: ['usr'], mode: 'reflink' };

/** The copy policy of a stage of `changes`: a command may write any file in place, so nothing of its tree may share an inode with another deployment. */
export function copyPolicyFor(policy: CopyPolicy, changes: ChangeSet): CopyPolicy {
  return changes.runInTree ? { ...policy, hardlinkPrefixes: [] } : policy;
}

/** What the new tree will take, for the free-space preflight of the stage and of its dry run (no pass over the manifest for a btrfs snapshot). */
export function spaceEstimate(layout: Layout, storage: StoragePreference, base: DeploymentRecord, policy: CopyPolicy, changes: ChangeSet, copyBytes?: number): Promise<SpaceEstimate> {
  return estimateBytes(layout.manifest(base.id), policy.hardlinkPrefixes, changes, { snapshot: snapshotsFrom(layout.root, storage, layout.tree(base.id)), ...(copyBytes === undefined ? {} : { copyBytes }) });
}

/** The node disruption policies a stage's activation decision uses: the MCO defaults, the user's merged over them (`disruptionPolicy`, else the base tree's file). */
export function stageDisruptionPolicy(layout: Layout, base: DeploymentRecord, o: { disruptionPolicy?: string }): DisruptionPolicy {
  return loadDisruptionPolicy(new ReadOnlyTree(layout.tree(base.id)), o.disruptionPolicy);
}

/** The kernel arguments of the deployment a stage of `changes` records: the base's, with the change set's applied. */
export function stagedKernelArguments(base: DeploymentRecord, changes: ChangeSet): string[] {
  return applyKernelArguments(base.kernelArguments ?? [], changes.kernelArguments);
}

/**
 * Where a stage of `changes` sets aside what it writes under the shared directories (for
 * finalize): `contentRoot`, or, for a dry run, the overlay `content` (nothing written).
 */
export function stageDivert(ctx: Context, state: BaseState, changes: ChangeSet, contentRoot: string, content?: RootFs): SharedDivert {
  return new SharedDivert({ shared: sharedDirs(state), mode: changes.sharedContent ?? 'initial', contentRoot, liveShared: (rel) => ctx.layout.shared(rel), faults: ctx.faults, warn: ctx.warn, ...(content ? { content } : {}) });
}
