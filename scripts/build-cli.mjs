/**
 * The CLI's bundles (run by `npm run build` after tsc): esbuild bundles
 *   src/cli/run.ts              -> dist/cli/run.js          (the CLI, loaded by the `stagedroot`
 *                                                           bin dist/cli/main.js, tsc's)
 *   src/cli/tree-worker-main.ts -> dist/cli/tree-worker.js  (its worker threads)
 * with source maps beside them. Why: a CLI run used to resolve, read and compile
 * ~160 modules of dist/ and ~140 of node_modules before doing anything (0.6 s on a quiet
 * machine, at every boot and shutdown). The library's dist/ (for importers) stays as tsc
 * builds it; tsc's dist/cli/run.js is replaced by the bundle.
 *
 * @napi-rs/xattr (native, loaded from its package at run time) stays outside.
 *   node scripts/build-cli.mjs [--metafile]   (metafile: dist/cli/meta.json, for size studies)
 */
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: 'linked',
  // Source maps point at the sources in the package's src/ (not shipped: the map carries them).
  sourcesContent: true,
  minifyWhitespace: true,
  minifySyntax: true,
  // Stacks keep the functions' names even without --debug (the map is read only then).
  keepNames: true,
  external: ['@napi-rs/xattr'],
  logLevel: 'warning',
  // Bundled CommonJS dependencies (commander, tar's deps) call require(): give them one.
  banner: { js: "import { createRequire as __stagedrootRequire } from 'node:module'; const require = __stagedrootRequire(import.meta.url);" },
  metafile: process.argv.includes('--metafile'),
  absWorkingDir: root,
};

const results = await Promise.all([
  build({ ...common, entryPoints: { run: 'src/cli/run.ts' }, outdir: 'dist/cli' }),
  build({ ...common, entryPoints: { 'tree-worker': 'src/cli/tree-worker-main.ts' }, outdir: 'dist/cli' }),
]);
if (common.metafile) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(path.join(root, 'dist/cli/meta.json'), JSON.stringify({ main: results[0].metafile, worker: results[1].metafile }));
}
