import type { Register } from './common.js';
import { VERBS, type VerbEntry } from './verbs.js';

/**
 * The verbs this program holds, and their modules' loading. As tsc builds it (dist/, the
 * repository's tests and scripts): every verb of the table, each module imported by name
 * when its verb runs. In the CLI's bundles scripts/build-cli.mjs replaces this module
 * with one it writes from the table: a static import() for each verb of that bundle (all
 * of them in dist/cli/run.cjs, the boot path's in dist/cli/boot.cjs), as esbuild would
 * bundle an import() of a template as every file of commands/ alike.
 */
export const HELD: readonly VerbEntry[] = VERBS;

/** A verb's register function, its module loaded now (only when that verb runs). */
export async function loadVerb(verb: VerbEntry): Promise<Register> {
  // A specifier in a variable, which Node resolves from this module as it is: vite (vitest)
  // would make a template literal's import() a glob of commands/*.js, which names no file.
  const specifier = `./commands/${verb.module}.js`;
  const mod = (await import(specifier)) as Record<string, Register | undefined>;
  const register = mod[verb.register];
  if (register === undefined) throw new Error(`stagedroot: src/cli/commands/${verb.module}.ts exports no ${verb.register} (src/cli/verbs.ts)`);
  return register;
}
