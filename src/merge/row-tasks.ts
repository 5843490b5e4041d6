import { defineTreeTask } from '../fs/jobs/tree-tasks.js';
import { changedRows, lookupRows, type Row, type RowSources } from './merge-rows.js';

/** The /etc merge's reads as tree tasks (run with runTreeTask, on a worker where there is one). */
export const rowTasks = {
  /** The rows where the live tree differs from the staged manifest (finalize). */
  changedRows: defineTreeTask(import.meta.url, 'changedRows', (a: RowSources & { always: string[] }): Row[] => changedRows(a)),
  /** The rows of a few paths (stage's type-conflict check). */
  lookupRows: defineTreeTask(import.meta.url, 'lookupRows', (a: RowSources & { paths: string[] }): Row[] => lookupRows(a)),
};
