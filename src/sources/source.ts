import type { ChangeSet } from '../changeset.js';

/** Read-only access to the tree an update is applied over (for names in etc/passwd, unit files). */
export interface BaseTree {
  /** Host path of the base tree's root (read only). */
  root: string;
  readFile(path: string): Buffer | null;
}

/** Anything that can be turned into a change set: a spec, an Ignition config, a layer, a directory. */
export interface Source {
  kind: string;
  /** Where it came from, for messages ("spec /tmp/web.json"). */
  describe: string;
  plan(base: BaseTree): Promise<ChangeSet>;
}
