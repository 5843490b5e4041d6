#!/usr/bin/env node
import { debugFlagged } from './debug.js';

// The `stagedroot` bin. The CLI itself is one bundled file (dist/cli/run.js, made by
// scripts/build-cli.mjs), loaded after this: with --debug or STAGEDROOT_DEBUG its stacks
// name the TypeScript sources through its source map, which Node reads only for modules
// loaded after source maps are turned on (and only then: parsing the map costs a start).
if (debugFlagged(process.env, process.argv.slice(2))) process.setSourceMapsEnabled(true);
await import('./run.js');
