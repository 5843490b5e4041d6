import type { Context } from '../context.js';
import { isDirectory } from '../fs/core/host-paths.js';
import type { BaseState } from '../state/schema.js';
import { LayerStore } from './store.js';

/**
 * The layer import's resume step (and the layer release's: both work under a temp name in
 * tmp/): what a crash cut short is removed, the objects no layer names first (an import may
 * have left some not written back), so that no later stage trusts a half-imported layer.
 * A sysroot with no layer store, or nothing under its tmp/, costs one directory read.
 */
export function resumeLayerImport(ctx: Context, state: BaseState, actions: string[]): BaseState {
  const store = new LayerStore(ctx.layout.layersDir, ctx.faults);
  if (!isDirectory(store.tmpDir)) return state;
  const left = store.removeLeftovers();
  if (left.length > 0) actions.push(`removed ${left.length === 1 ? 'a layer import or release' : `${left.length} layer imports or releases`} cut short (${left.map((n) => `layers/tmp/${n}`).join(', ')}) and the objects no layer names`);
  return state;
}
