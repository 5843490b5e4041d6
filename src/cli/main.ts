#!/usr/bin/env node
import { createRequire } from 'node:module';
import { debugFlagged } from './debug.js';

// The `stagedroot` bin. The CLI itself is one bundled file (dist/cli/run.js, made by
// scripts/build-cli.mjs), loaded after this: with --debug or STAGEDROOT_DEBUG its stacks
// name the TypeScript sources through its source map, which Node reads only for modules
// loaded after source maps are turned on (and only then: parsing the map costs a start).
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  // What commander prints for it (program.ts), without loading the CLI: package.json's version.
  process.stdout.write(`${(createRequire(import.meta.url)('../../package.json') as { version: string }).version}\n`);
} else {
  if (debugFlagged(process.env, argv)) process.setSourceMapsEnabled(true);
  await import('./run.js');
}
