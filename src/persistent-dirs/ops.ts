import { z } from 'zod';
import { parseJsonState } from '../util/json-state.js';
import { isTreePath, TREE_PATH_RULE } from '../fs/core/paths.js';

/**
 * What an update does under the shared directories, recorded at stage beside its tree
 * (deploy/ID/shared-ops.json) and applied at finalize, in order. The content of a `put`
 * is the entry at the same path in deploy/ID/shared/ (checked and written there at
 * stage through the safe-fs layer, like any tree).
 *
 * - `put`, when `absent`: initial content (layers, images; `overwrite: false` in a spec):
 *   applied only where the shared directory has nothing at that path.
 * - `put`, when `always`: desired state (specs, Ignition): written over what is there,
 *   the previous version kept aside and reported.
 * - `remove`: desired state: removed, the previous version kept aside and reported.
 */
export const sharedOpSchema = z
  .object({
    op: z.enum(['put', 'remove']),
    path: z.string().refine(isTreePath, TREE_PATH_RULE),
    when: z.enum(['absent', 'always']),
  })
  .strict();
export type SharedOp = z.infer<typeof sharedOpSchema>;

export const sharedOpsSchema = z.object({ ops: z.array(sharedOpSchema) }).strict();

export function parseSharedOps(text: string, file: string): SharedOp[] {
  return parseJsonState(text, file, sharedOpsSchema, 'shared-ops').ops;
}
