import { fileURLToPath } from 'node:url';
import { runBundle } from './code-cache.js';
import { offerCodeCacheWrite } from '../fs/jobs/worker-code-cache.js';

/**
 * The file a tree worker starts (bundled by scripts/build-cli.mjs as dist/cli/tree-worker.js,
 * and as dist/lib/tree-worker.js for the library): it runs the worker's CommonJS bundle,
 * dist/cli/tree-worker.cjs (src/cli/tree-worker-main.ts), from V8's code cache beside it, as
 * the bin runs the CLI's (code-cache.ts): a worker's start then deserializes the functions it
 * runs instead of compiling 200 kB of JavaScript, and the Node builtins its tasks may not use
 * (crypto, child_process, os) are loaded at first use rather than at the bundle's top. The
 * cache is written from the worker after its tasks (worker-code-cache.ts): a worker thread's
 * exit handlers do not run. One bundle and one cache serve the CLI and the library.
 */
const file = fileURLToPath(new URL('../cli/tree-worker.cjs', import.meta.url));
runBundle(file, { name: 'stagedroot/dist/cli/tree-worker.cjs', sourceMaps: process.sourceMapsEnabled, env: process.env, onStaleCache: offerCodeCacheWrite });
