#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import { runBundle } from './code-cache.js';
import { onBootPath, startsTreeWork } from './boot-path.js';
import { startEarlyTreeWorker } from '../fs/jobs/early-worker.js';
import { globalFlags, version } from './flags.js';

// The `stagedroot` bin: bundled by scripts/build-cli.mjs into dist/cli/main.cjs (CommonJS:
// an ES module entry costs Node ~10 ms more to start). The CLI itself is two CommonJS
// bundles run from V8's code cache (code-cache.ts): dist/cli/boot.cjs, the boot
// path's verbs alone (verbs.ts's bootPath rows), and dist/cli/run.cjs, every verb. With --debug or
// STAGEDROOT_DEBUG their stacks name the TypeScript sources through their source maps,
// which Node reads only for modules loaded after source maps are turned on (and only
// then: parsing a map costs a start).
const argv = process.argv.slice(2);
const flags = globalFlags(argv, process.env);
if (flags.version) {
  // What the program prints for it (program.ts), without loading the CLI.
  process.stdout.write(`${version()}\n`);
} else {
  if (flags.debug) process.setSourceMapsEnabled(true);
  // A stage's first tree worker starts on another core while this thread loads the bundle (the worker bundle beside it, as tree-jobs.ts finds it).
  if (startsTreeWork(flags.argv)) startEarlyTreeWorker(new URL('./tree-worker.js', import.meta.url), process.env);
  const bundle = onBootPath(flags.argv) ? 'boot.cjs' : 'run.cjs';
  const cli = runBundle(fileURLToPath(new URL(`./${bundle}`, import.meta.url)), { name: `stagedroot/dist/cli/${bundle}`, sourceMaps: flags.debug, env: process.env }) as { main: (argv: string[]) => Promise<void> };
  void cli.main(argv);
}
