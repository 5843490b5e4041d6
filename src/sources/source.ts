import type { ChangeOp, ChangeSet, StorableLayer } from '../changeset.js';
import type { Origin } from '../state/schema.js';
import type { LayerLimits } from './layer/entry-checks.js';
import type { SignedPayload } from '../trust/verify.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import type { ConfigRecord } from '../state/config-record.js';

/**
 * The tree an update is applied over (for names in etc/passwd, unit files), seen
 * read-only: a source plans, it never writes into the booted tree.
 */
export type BaseTree = ReadOnlyTree;

/** What a source is, known before it is planned: what its signature covers, which image it is. */
export interface SourceInfo {
  /** What a detached signature covers, and where that signature is by default (SOURCE.minisig). */
  signed?: { payload: SignedPayload; defaultSignature: string };
  /** An image's identity (manifest digest, labels): recorded with the deployment. */
  origin?: Origin;
  /** A label the source suggests (an image's org.opencontainers.image.version). */
  label?: string;
  /**
   * The image carries more than itself (a MachineConfig over the OS image it names): the
   * booted deployment running the same image does not make the stage a no-op.
   */
  withConfig?: boolean;
  /**
   * An image's layers by diff_id, bottom first, as its config lists them: not checked here
   * (each layer's is when it is imported), only a hint of what the plan will stack (a stage
   * over a deployment of the same bottom layer starts copying its usr/ while they are imported).
   */
  diffIds?: string[];
  /**
   * The change set is applied over a copy of the base tree, the copy a stage makes by
   * default: it never clears the tree and runs no command in it (an update spec, an
   * Ignition config). A stage may start that copy before the plan, beside it.
   */
  overBase?: boolean;
}

/** What a source may know about the deployment it is planned over, beside its tree. */
export interface PlanContext {
  /**
   * The record of the config the base deployment was staged from (its kernel arguments,
   * the paths it owns), or null: a config source undoes what it no longer asks for.
   */
  config: ConfigRecord | null;
  /** The base deployment's image (an image deployment's origin): a config naming that image needs no new tree. */
  origin?: Origin;
  /**
   * The sysroot's layer store, when the planner keeps one (a stage; not a dry run): an
   * image source hands it its layers, bottom first, instead of reading them itself. Each
   * one the store lacks is imported (read once, every entry checked as for a hostile
   * archive); one it has is not read at all. Returns the ops of the fresh apply of the
   * stack (the tree cleared, then each layer), with each file's content in the store.
   */
  layerStore?: LayerStoreHandle;
}

/** See PlanContext.layerStore. */
export interface LayerStoreHandle {
  stack(layers: readonly StorableLayer[], o?: { limits?: Partial<LayerLimits> }): Promise<{ ops: Iterable<ChangeOp>; count: number }>;
  /** Whether the store has the layer a blob holds (by diff_id, or compressed digest): a puller need not fetch it. */
  has(ref: { digest?: string; diffId?: string }): boolean;
}

/** Anything that can be turned into a change set: a spec, an Ignition config, a layer, a directory. */
export interface Source {
  kind: string;
  /** Where it came from, for messages ("spec /tmp/web.json"). */
  describe: string;
  /**
   * Reads what the source is without planning it (an image's index and manifest,
   * checked). Sources read from a file have one; in-memory sources do not.
   */
  inspect?(): Promise<SourceInfo>;
  plan(base: BaseTree, context?: PlanContext): Promise<ChangeSet>;
}
