#!/usr/bin/env node
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { runBundle } from '../fs/core/code-cache.js';
import { debugFlagged } from './debug.js';

// The `stagedroot` bin: bundled by scripts/build-cli.mjs into dist/cli/main.cjs (CommonJS:
// an ES module entry costs Node ~10 ms more to start). The CLI itself is one CommonJS
// bundle, dist/cli/run.cjs, run from V8's code cache (fs/core/code-cache.ts); with --debug
// or STAGEDROOT_DEBUG its stacks name the TypeScript sources through its source map, which
// Node reads only for modules loaded after source maps are turned on (and only then:
// parsing the map costs a start).
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  // What commander prints for it (program.ts), without loading the CLI: package.json's version.
  process.stdout.write(`${(createRequire(import.meta.url)('../../package.json') as { version: string }).version}\n`);
} else {
  const debug = debugFlagged(process.env, argv);
  if (debug) process.setSourceMapsEnabled(true);
  const cli = runBundle(fileURLToPath(new URL('./run.cjs', import.meta.url)), { name: 'stagedroot/dist/cli/run.cjs', sourceMaps: debug, env: process.env }) as { main: (argv: string[]) => Promise<void> };
  void cli.main(argv);
}
