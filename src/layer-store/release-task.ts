import { defineTreeTask } from '../fs/jobs/tree-tasks.js';
import { releaseLayers, type ReleaseResult } from './release.js';
import { LayerStore } from './store.js';

/** The layer store's mark-sweep as a tree task (it reads every kept layer's index and lists every object: run on a worker). */
export const releaseTasks = {
  releaseLayers: defineTreeTask(import.meta.url, 'releaseLayers', (a: { store: string; keep: string[] }, h): ReleaseResult => releaseLayers(new LayerStore(a.store, h.faults), a.keep)),
};
