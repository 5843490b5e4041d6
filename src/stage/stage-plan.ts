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

/** The label when nothing names one. */
export const DEFAULT_LABEL = 'update';

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
