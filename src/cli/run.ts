/**
 * The entry of the CLI's bundles (CommonJS), dist/cli/run.cjs (every verb) and
 * dist/cli/boot.cjs (the boot path's verbs alone): scripts/build-cli.mjs builds both from
 * here, each with the verbs of src/cli/verbs.ts it holds. The bin (main.ts) calls `main`
 * with its arguments once it has loaded the bundle; the build calls it for several verbs
 * in one process (with places of its own for `boot`, never this machine's
 * /run/stagedroot), so that the code cache it leaves holds what each of them compiles.
 * No fault hook here: crash tests kill a CLI through src/testing/crash-cli.ts, never this entry.
 */
export { main } from './program.js';
