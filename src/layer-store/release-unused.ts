import type { Context } from '../context.js';
import { exists } from '../fs/core/host-paths.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { loadState } from '../store/state-file.js';
import type { ReleaseResult } from './release.js';
import { releaseTasks } from './release-task.js';

/**
 * After deployments were removed (prune, discard, a superseded stage): the store's layers
 * that no remaining deployment records (origin.layers, a failed one's included) go, and
 * the objects only they named. Runs under the writer lock, on a worker. Null: no store.
 */
export async function releaseUnusedLayers(ctx: Context): Promise<ReleaseResult | null> {
  if (!exists(ctx.layout.layersDir)) return null;
  const s = loadState(ctx.layout).state;
  const keep = [...new Set(s.deployments.flatMap((d) => d.origin?.layers ?? []))];
  return runTreeTask(releaseTasks.releaseLayers, { store: ctx.layout.layersDir, keep }, { faults: ctx.faults });
}
