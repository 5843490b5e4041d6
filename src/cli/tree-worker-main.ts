/**
 * The entry of the CLI's worker bundle (dist/cli/tree-worker.js, scripts/build-cli.mjs):
 * every module that defines tree tasks, so that they are registered when the worker
 * starts, and the worker's loop. Only what the tasks run is in that bundle, not the
 * CLI's module graph. A module that defines tasks (defineTreeTask) is listed here; a
 * test checks it.
 */
import '../fs/trees/tasks.js';
import '../fs/manifests/tasks.js';
import '../merge/row-tasks.js';
import '../layer-store/link-tree.js';
import '../layer-store/release-task.js';
import '../fs/jobs/tree-worker.js';
