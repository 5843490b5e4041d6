import { bundleMain } from './make-program.js';
import { VERBS } from './program.js';

/**
 * The CLI bundle's entry (dist/cli/run.cjs, CommonJS): the bin (main.ts) calls it with
 * its arguments once it has loaded the bundle (the boot path's verbs run from boot.cjs
 * instead: boot-run.ts); the build calls it for several verbs in one process, so that
 * the code cache it leaves holds what each of them compiles. No fault hook here: crash
 * tests kill a CLI through src/testing/crash-cli.ts, never this entry.
 */
export const main = bundleMain(VERBS);
