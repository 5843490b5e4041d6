import type { Issue } from '../errors.js';
import type { ManifestEntry } from '../fs/manifests/manifest-line.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';

export interface ValidationContext {
  /** Host path of the staged tree (read it; do not write it): for tools run over it. */
  tree: string;
  /** The staged tree, read-only, paths resolved inside it (`etc -> /etc` stays in the tree): what a check should read through. */
  staged: ReadOnlyTree;
  /** The tree the update was built from (the booted one), read-only. */
  base?: ReadOnlyTree;
  id: string;
  label: string;
  /** Host path of the staged tree's manifest. */
  manifest: string;
  /** Tree paths the update changed. */
  delta: readonly string[];
  /**
   * The manifest entries of `delta`'s paths, as the manifest step read them from the
   * staged tree once the update was applied (type, mode, owner), when the caller has
   * them: a check of modes reads these instead of resolving every path again.
   */
  deltaEntries?: readonly Pick<ManifestEntry, 'p' | 't' | 'm'>[];
  /** Host path of the tree the update was built from (the booted one), to tell new problems from old ones. */
  baseTree?: string;
  /** Abort long-running validators when the stage is abandoned. */
  signal?: AbortSignal;
}

export type ValidatorFn = (ctx: ValidationContext) => Issue[] | Promise<Issue[]>;

/** A validator: a function, or a named one (its name is shown with its issues). */
export type Validator = ValidatorFn | { name: string; run: ValidatorFn };

export interface ValidationResult {
  issues: Issue[];
  /** Output captured from command validators (bounded). */
  output?: string;
}
