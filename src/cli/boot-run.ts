import { BOOT_VERBS } from './boot-verbs.js';
import { bundleMain } from './make-program.js';

/**
 * The boot bundle's entry (dist/cli/boot.cjs): the bin runs the boot path's verbs
 * (boot-path.ts) from it, as run.ts runs the others, but only their modules are in this
 * bundle and its code cache. Its `main` takes an Io too: the build runs `boot` with
 * places of its own (never this machine's /run/stagedroot).
 */
export const main = bundleMain(BOOT_VERBS);
