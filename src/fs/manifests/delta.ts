import { z } from 'zod';
import { parseJsonState } from '../../util/json-state.js';
import { readEntry, typeName } from './manifest.js';
import { manifestEntrySchema, type ManifestEntry } from './manifest-line.js';
import { hostPath } from '../core/names.js';
import { lstatInTree } from '../core/tree-lstat.js';
import { compareEntry, type Drift } from './verify-tree.js';

/**
 * What an update changed in its deployment (deploy/ID/delta.json): the new entries of
 * the paths it wrote and the paths it removed. Finalize re-checks exactly these, so its
 * cost follows the size of the update, not the size of the tree.
 */
export const deltaSchema = z.object({ changed: z.array(manifestEntrySchema), removed: z.array(z.string()) }).strict();
export type Delta = z.infer<typeof deltaSchema>;

export function parseDelta(text: string, file: string): Delta {
  return parseJsonState(text, file, deltaSchema, 'delta');
}

/** Checks the delta's entries against the tree: changed entries as recorded, removed paths absent. */
export function verifyDelta(tree: string, delta: Delta): Drift[] {
  const drift: Drift[] = [];
  // Entries are looked up inside the tree: a symlink above a path is not followed out of it.
  const dirs = new Set<string>();
  for (const want of delta.changed) {
    const st = lstatInTree(tree, want.p, dirs);
    if (st === null) {
      drift.push({ path: want.p, kind: 'missing', expected: typeName(want.t) });
      continue;
    }
    const have: ManifestEntry = readEntry(want.p, hostPath(tree, want.p), st);
    drift.push(...compareEntry(want, have));
  }
  for (const p of delta.removed) {
    if (lstatInTree(tree, p, dirs) !== null) drift.push({ path: p, kind: 'extra', actual: 'present although the update removed it' });
  }
  return drift;
}
