/**
 * The verbs every boot runs (`boot` and `health` from the units, `mark-good`/`mark-bad`
 * from health or an admin, `status` from agents): the bin (main.ts) runs them from a
 * bundle of their own, dist/cli/boot.cjs, with its own code cache, so that a boot reads,
 * deserializes and evaluates only their modules. Their commands are BOOT_VERBS
 * (boot-verbs.ts); this list is apart so that the bin knows the names without bundling
 * the commands (a test checks the two agree).
 */
export const BOOT_PATH_VERBS: readonly string[] = ['status', 'boot', 'mark-good', 'mark-bad', 'health'];

/** The verb a command line names: its first word that is not an option (undefined: none, as for `--help`). */
export function verbWord(argv: readonly string[]): string | undefined {
  return argv.find((a) => !a.startsWith('-'));
}

/** True when the command line's verb is one of the boot path's. */
export function onBootPath(argv: readonly string[]): boolean {
  const word = verbWord(argv);
  return word !== undefined && BOOT_PATH_VERBS.includes(word);
}
