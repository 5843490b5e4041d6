import type { ChangeSet } from '../changeset.js';
import type { ReadOnlyTree } from '../fs/read-only-tree.js';

/**
 * The tree an update is applied over (for names in etc/passwd, unit files), seen
 * read-only: a source plans, it never writes into the booted tree.
 */
export type BaseTree = ReadOnlyTree;

/** Anything that can be turned into a change set: a spec, an Ignition config, a layer, a directory. */
export interface Source {
  kind: string;
  /** Where it came from, for messages ("spec /tmp/web.json"). */
  describe: string;
  plan(base: BaseTree): Promise<ChangeSet>;
}
