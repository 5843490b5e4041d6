// Injected by scripts/build-cli.mjs into its CommonJS bundles: `import.meta.url`, the bundle file's URL
// (__filename is the bundle's: esbuild leaves it to Node's CommonJS wrapper).
/* global __filename */
import { pathToFileURL } from 'node:url';

export const __stagedrootUrl = pathToFileURL(__filename).href;
