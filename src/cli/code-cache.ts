import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import { constants as vmConstants, Script } from 'node:vm';
import { readPackageFile, replacePackageFileBestEffort } from '../fs/core/package-files.js';

/**
 * Runs a CommonJS bundle (the CLI's dist/cli/run.cjs and boot.cjs, the library's dist/lib/library.cjs)
 * and returns its exports, with V8's code cache, the way the
 * v8-compile-cache package does for Node before 22 (no module.enableCompileCache): the
 * bundle is compiled by vm.Script with the bytes V8 serialized after an earlier run
 * (`FILE.v8-cache`, beside it), so that a start deserializes the functions it runs
 * instead of parsing a megabyte of JavaScript. V8 checks the bytes itself (its version,
 * its flags, the source's length) and rejects what does not fit; the cache also names the
 * bundle's build stamp (the `// stagedroot-bundle STAMP` comment the build puts on its
 * first line), so that a rebuilt bundle of the same length never runs with another
 * build's code. Whatever goes wrong with the cache (absent, stale, torn, unreadable,
 * unwritable) the bundle is compiled from its source, as without one; the cache is then
 * written again when the process exits (best effort: a read-only /usr simply keeps none).
 *
 * `o.onStaleCache`: where the cache is not used, the caller is handed its writer instead of
 * it being written at the process's exit (a worker thread, whose exit handlers never run).
 *
 * With source maps on (--debug) the bundle is loaded by Node's own require, which reads
 * its source map: the cache is only for the fast path.
 *
 * `o.name` is the script's name in stack traces, one that does not depend on where the
 * package is (`stagedroot/dist/cli/run.cjs`): V8's cache keeps the name the script was
 * compiled with (the build's own path, for the cache npm pack ships), so a name taken
 * from the file's place would be right on one machine and wrong on the others.
 */
export function runBundle(file: string, o: { name: string; sourceMaps: boolean; env: NodeJS.ProcessEnv; onStaleCache?: (write: () => boolean) => void }): unknown {
  const require = createRequire(file);
  if (o.sourceMaps || o.env.STAGEDROOT_CODE_CACHE === '0') return require(file);
  const source = readPackageFile(file, 'utf8');
  const stamp = /^\/\/ stagedroot-bundle (\S+)\n/.exec(source)?.[1];
  const cacheFile = `${file}.v8-cache`;
  const cachedData = stamp === undefined ? undefined : readCache(cacheFile, stamp);
  const script = new Script(Module.wrap(source), { filename: o.name, ...(cachedData === undefined ? {} : { cachedData }), ...dynamicImports() });
  if (stamp !== undefined && (cachedData === undefined || script.cachedDataRejected === true)) {
    const write = (): boolean => writeCache(cacheFile, stamp, script);
    // After the run: the cache then holds the functions this verb compiled, not only the top level.
    // A worker thread's exit handlers never run: its entry writes it when it says (onStaleCache).
    if (o.onStaleCache !== undefined) o.onStaleCache(write);
    else process.once('exit', write);
  }
  const wrapper = script.runInThisContext() as (exports: object, req: NodeJS.Require, module: object, filename: string, dirname: string) => void;
  const module = { exports: {}, filename: file };
  wrapper.call(module.exports, module.exports, require, module, file, dirname(file));
  return module.exports;
}

const MAGIC = 'stagedroot-v8-cache 1 ';

/** The cached bytes when the file is a cache of this build (`MAGIC STAMP\n` then V8's bytes); undefined otherwise. */
function readCache(cacheFile: string, stamp: string): Buffer | undefined {
  let bytes: Buffer;
  try {
    bytes = readPackageFile(cacheFile);
  } catch {
    return undefined;
  }
  const head = `${MAGIC}${stamp}\n`;
  if (bytes.length <= head.length || bytes.toString('latin1', 0, head.length) !== head) return undefined;
  return bytes.subarray(head.length);
}

function writeCache(cacheFile: string, stamp: string, script: Script): boolean {
  // Unwritable (a read-only /usr, another user's package): the next start compiles from source again.
  return replacePackageFileBestEffort(cacheFile, () => Buffer.concat([Buffer.from(`${MAGIC}${stamp}\n`, 'latin1'), script.createCachedData()]));
}

/** import() inside the bundle goes to Node's own loader (Node ≥ 20.12 has the constant); the bundle calls none on the CLI's paths. */
function dynamicImports(): { importModuleDynamically?: number } {
  const c = (vmConstants as { USE_MAIN_CONTEXT_DEFAULT_LOADER?: number } | undefined)?.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  return c === undefined ? {} : { importModuleDynamically: c };
}
