import { VERBS } from './verbs.js';

/** The verbs the bin runs from the boot bundle, dist/cli/boot.cjs (verbs.ts's `bootPath` rows). */
export const BOOT_PATH_VERBS: readonly string[] = VERBS.filter((v) => v.bootPath).flatMap((v) => v.names);

/** The verb a command line names: its first word that is not an option (undefined: none, as for `--help`). */
export function verbWord(argv: readonly string[]): string | undefined {
  return argv.find((a) => !a.startsWith('-'));
}

/** True when the command line's verb copies a tree on worker threads (verbs.ts's `treeWork` rows) and does not only ask for its help. */
export function startsTreeWork(argv: readonly string[]): boolean {
  const word = verbWord(argv);
  return word !== undefined && !argv.includes('--help') && !argv.includes('-h') && VERBS.some((v) => v.treeWork === true && v.names.includes(word));
}

/** True when the command line's verb is one of the boot path's. */
export function onBootPath(argv: readonly string[]): boolean {
  const word = verbWord(argv);
  return word !== undefined && BOOT_PATH_VERBS.includes(word);
}
