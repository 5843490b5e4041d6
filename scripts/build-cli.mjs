/**
 * The CLI's bundles (run by `npm run build` after tsc): esbuild bundles
 *   src/cli/main.ts             -> dist/cli/main.cjs        (the `stagedroot` bin: a stub that answers
 *                                                           --version and runs the next one)
 *   src/cli/run.ts              -> dist/cli/run.cjs         (the CLI, CommonJS) and its V8 code cache
 *                                                           dist/cli/run.cjs.v8-cache
 *   src/cli/run.ts              -> dist/cli/boot.cjs        (the boot path's verbs alone: src/cli/verbs.ts's
 *                                                           bootPath rows) and dist/cli/boot.cjs.v8-cache
 *   src/cli/tree-worker-main.ts -> dist/cli/tree-worker.cjs (its worker threads' tasks) and its V8
 *                                                           code cache dist/cli/tree-worker.cjs.v8-cache
 *   src/cli/tree-worker-entry.ts -> dist/cli/tree-worker.js (the file a worker starts, an ES module:
 *                                                           runs tree-worker.cjs from its cache;
 *                                                           dist/lib/tree-worker.js the same)
 * with source maps beside them. Why: a CLI run used to resolve, read and compile
 * ~160 modules of dist/ and ~140 of node_modules before doing anything (0.6 s on a quiet
 * machine, at every boot and shutdown); one ES module bundle still cost V8 a parse of its
 * megabyte at each start (compileSourceTextModule 78–125 ms). The CLI is CommonJS so that
 * src/cli/code-cache.ts can run it with V8's code cache (vm.Script's cachedData: Node
 * 20 has no module.enableCompileCache), and so that a Node builtin is loaded where it is
 * first used (see lazyBuiltins) rather than hoisted to the bundle's top as in an ES bundle.
 * The build writes the cache by running `stagedroot status` once; a Node whose V8 rejects
 * it compiles from source and writes it again (see code-cache.ts).
 *
 * The library's dist/ (for importers) stays as tsc builds it.
 * @napi-rs/xattr (native, loaded from its package at run time) stays outside.
 *   node scripts/build-cli.mjs [--metafile]   (metafile: dist/cli/meta.json, for size studies)
 */
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, transform } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cliDir = path.join(root, 'dist/cli');
const metafile = process.argv.includes('--metafile');
const common = {
  bundle: true,
  platform: 'node',
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
  metafile,
  absWorkingDir: root,
};
// A CommonJS bundle has no import.meta: its url is the bundle file's (dist/cli/, where
// packageDir(), ../../package.json and the worker's ./tree-worker.js resolve as from tsc's dist/cli/).
const commonJs = {
  ...common,
  format: 'cjs',
  define: { 'import.meta.url': '__stagedrootUrl' },
  inject: ['scripts/build-cli-url.mjs'],
};

/**
 * Node builtins that `node -e 0` has not loaded already, each bundled as a stand-in whose
 * properties load the real module on first use: commander requires child_process at its
 * top (for executable subcommands the CLI never has), hashing requires crypto, the
 * sources zlib, and so on; `status` and `boot` touch none of them. esbuild's __toESM copies
 * a module's property names as getters, so an `import * as x` does not load it either.
 */
const LAZY = ['assert', 'child_process', 'crypto', 'dgram', 'dns', 'http', 'https', 'net', 'os', 'perf_hooks', 'readline', 'stream/promises', 'string_decoder', 'timers/promises', 'tls', 'tty', 'v8', 'worker_threads', 'zlib'];
const builtinsPlugin = (o) => ({
  name: 'builtins',
  setup(b) {
    const bare = (p) => p.replace(/^node:/, '');
    const lazy = new Set(LAZY.filter((m) => builtinModules.includes(m)));
    b.onResolve({ filter: /^(node:|lazy:)?[a-z_/]+$/ }, (args) => {
      if (args.path.startsWith('lazy:')) return { path: args.path.slice('lazy:'.length), namespace: 'lazy-builtin' };
      const name = bare(args.path);
      if (!builtinModules.includes(name)) return undefined;
      // require() (in a CommonJS dependency) takes the module itself: no namespace to copy into.
      const direct = args.namespace === 'builtin' || args.namespace === 'lazy-builtin' || ((!o.namespaces || args.kind === 'require-call') && !lazy.has(name));
      if (direct) return { path: `node:${name}`, external: true };
      return { path: name, namespace: 'builtin' };
    });
    const req = createRequire(import.meta.url);
    // One namespace object per builtin, its names copied once: esbuild's __toESM would copy
    // fs's hundred names at each of its 35 importers (and crypto's seventy at each of its
    // eight); the default export is the module itself (an `import m from` would copy too).
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => {
      const spec = JSON.stringify(`${lazy.has(args.path) ? 'lazy' : 'node'}:${args.path}`);
      return { contents: `const m=require(${spec});export * from ${spec};export default m;`, loader: 'js', resolveDir: root };
    });
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => {
      const spec = JSON.stringify(`node:${args.path}`);
      const names = Object.keys(req(spec.slice(1, -1))).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k));
      const getters = names.map((k) => `get ${k}(){return l().${k}}`).join(',');
      return { contents: `let m;const l=()=>m??=require(${spec});module.exports={${getters}};`, loader: 'js', resolveDir: root };
    });
  },
});
const builtins = builtinsPlugin({ namespaces: true });

/**
 * The boot bundle leaves out what the Sysroot loads by import() for the verbs that are
 * not on the boot path (staging, the sources, finalize, the manifests' tree tasks): half
 * the bytes a boot reads and V8 checks. Such an import() in the boot bundle fails loudly
 * rather than loading a second copy of the library (test/cli/boot-bundle.test.ts runs
 * each boot-path verb from it).
 */
const NOT_ON_BOOT_PATH = /^src\/(stage|sources|commit)\/|^src\/fs\/manifests\/tasks\.ts$/;
const bootOnly = {
  name: 'boot-only',
  setup(b) {
    b.onResolve({ filter: /^\./ }, (args) => {
      if (args.kind !== 'dynamic-import') return undefined;
      const file = path.relative(root, path.resolve(args.resolveDir, args.path)).replace(/\.js$/, '.ts');
      return NOT_ON_BOOT_PATH.test(file) ? { path: file, namespace: 'not-on-boot-path' } : undefined;
    });
    b.onLoad({ filter: /.*/, namespace: 'not-on-boot-path' }, (args) => ({
      contents: `throw new Error(${JSON.stringify(`stagedroot: ${args.path} is not in the boot bundle (dist/cli/boot.cjs): only the boot path's verbs run from it`)});`,
      loader: 'js',
    }));
  },
};

/**
 * The verbs (src/cli/verbs.ts, data only: loaded here from its source, types stripped) and
 * each bundle's share of them: src/cli/verb-modules.ts is replaced in a bundle by one
 * static import() per verb it holds (a template-literal import() would be bundled by
 * esbuild as a glob of every command's module, the boot bundle's too).
 */
const { VERBS } = await import(`data:text/javascript;base64,${Buffer.from((await transform(fs.readFileSync(path.join(root, 'src/cli/verbs.ts'), 'utf8'), { loader: 'ts', format: 'esm' })).code).toString('base64')}`);
const verbsPlugin = (held) => ({
  name: 'verbs',
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/]cli[\\/]verb-modules\.ts$/ }, () => {
      const loads = held.map((v) => `  ${JSON.stringify(v.module)}: () => import(${JSON.stringify(`./commands/${v.module}.js`)}).then((m) => m.${v.register}),`);
      return {
        contents: `// Written by scripts/build-cli.mjs from src/cli/verbs.ts: the verbs of this bundle.\nimport { VERBS } from './verbs.js';\nconst loads = {\n${loads.join('\n')}\n};\nexport const HELD = VERBS.filter((v) => Object.hasOwn(loads, v.module));\nexport const loadVerb = (v) => loads[v.module]();\n`,
        loader: 'js',
        resolveDir: path.join(root, 'src/cli'),
      };
    });
  },
});
const allVerbs = verbsPlugin(VERBS);
const bootVerbs = verbsPlugin(VERBS.filter((v) => v.bootPath));

// The stamp placeholder has the stamp's length, so that replacing it moves nothing the source map points at.
const PLACEHOLDER = 'x'.repeat(16);
const stamped = { banner: { js: `// stagedroot-bundle ${PLACEHOLDER}` }, plugins: [allVerbs, builtins], write: false };
const libDir = path.join(root, 'dist/lib');
// The file a worker thread starts (an ES module, as package.json's type makes a .js file): it runs
// the worker bundle, dist/cli/tree-worker.cjs, from its code cache (src/cli/tree-worker-entry.ts);
// the library's entry beside library.cjs runs the same bundle.
const workerEntry = {
  ...common,
  format: 'esm',
  entryPoints: { 'tree-worker': 'src/cli/tree-worker-entry.ts' },
  plugins: [builtins],
  // The lazy builtins call require(): give them one.
  banner: { js: "import { createRequire as __stagedrootRequire } from 'node:module'; const require = __stagedrootRequire(import.meta.url);" },
};
const [, runResult, bootResult, workerResult, libraryResult] = await Promise.all([
  build({ ...commonJs, plugins: [builtinsPlugin({ namespaces: false })], entryPoints: { main: 'src/cli/main.ts' }, outdir: 'dist/cli', outExtension: { '.js': '.cjs' } }),
  build({ ...commonJs, ...stamped, entryPoints: { run: 'src/cli/run.ts' }, outdir: 'dist/cli', outExtension: { '.js': '.cjs' } }),
  build({ ...commonJs, ...stamped, plugins: [bootOnly, bootVerbs, builtins], entryPoints: { boot: 'src/cli/run.ts' }, outdir: 'dist/cli', outExtension: { '.js': '.cjs' } }),
  build({ ...commonJs, ...stamped, plugins: [builtins], entryPoints: { 'tree-worker': 'src/cli/tree-worker-main.ts' }, outdir: 'dist/cli', outExtension: { '.js': '.cjs' } }),
  // The library for importers (package.json's exports): one bundle with both entries, so
  // that `stagedroot` and `stagedroot/testing` share their classes; its own worker beside it.
  build({
    ...commonJs,
    ...stamped,
    stdin: { contents: "export * as main from './src/index.js';\nexport * as testing from './src/testing/index.js';\n", resolveDir: root, sourcefile: 'library-entry.ts', loader: 'ts' },
    outfile: 'dist/lib/library.cjs',
  }),
  build({
    ...commonJs,
    stdin: { contents: "import * as path from 'node:path';\nimport { runBundle } from './src/cli/code-cache.js';\nexport const library = runBundle(path.join(__dirname, 'library.cjs'), { name: 'stagedroot/dist/lib/library.cjs', sourceMaps: process.sourceMapsEnabled === true, env: process.env });\n", resolveDir: root, sourcefile: 'library-load.ts', loader: 'ts' },
    outfile: 'dist/lib/load.cjs',
  }),
  build({ ...workerEntry, outdir: 'dist/cli' }),
  build({ ...workerEntry, outdir: 'dist/lib' }),
]);

/** Writes a stamped bundle's files, the bundle stamped with its own hash (the code cache names the build it was made from). */
function writeStamped(result, file) {
  for (const out of result.outputFiles) {
    let text = out.text;
    if (out.path === file) text = text.replace(PLACEHOLDER, createHash('sha256').update(text).digest('hex').slice(0, PLACEHOLDER.length));
    fs.writeFileSync(out.path, text);
  }
  fs.rmSync(`${file}.v8-cache`, { force: true });
}
const runFile = path.join(cliDir, 'run.cjs');
const bootFile = path.join(cliDir, 'boot.cjs');
const workerFile = path.join(cliDir, 'tree-worker.cjs');
writeStamped(runResult, runFile);
writeStamped(bootResult, bootFile);
writeStamped(workerResult, workerFile);
fs.chmodSync(path.join(cliDir, 'main.cjs'), 0o755);
await writeCodeCaches();
writeStamped(libraryResult, path.join(libDir, 'library.cjs'));
writeLibraryEntries();

if (metafile) {
  fs.writeFileSync(path.join(cliDir, 'meta.json'), JSON.stringify({ main: runResult.metafile, boot: bootResult.metafile, worker: workerResult.metafile, library: libraryResult.metafile }));
}

/**
 * The ES modules importers load (package.json's exports): dist/lib/index.mjs and
 * testing.mjs re-export the library bundle's names, listed here by loading it once (which
 * also leaves its code cache). `export const { ... } = ...` keeps them named exports.
 */
function writeLibraryEntries() {
  const r = spawnSync(process.execPath, ['-e', `const l = require(${JSON.stringify(path.join(libDir, 'load.cjs'))}).library; console.log(JSON.stringify({ main: Object.keys(l.main), testing: Object.keys(l.testing) }))`], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_CODE_CACHE: '' } });
  if (r.status !== 0) throw new Error(`build-cli: the library bundle does not load: ${r.stderr}`);
  const names = JSON.parse(r.stdout);
  for (const [entry, file] of [['main', 'index.mjs'], ['testing', 'testing.mjs']]) {
    const list = names[entry].filter((n) => n !== 'default').sort();
    fs.writeFileSync(
      path.join(libDir, file),
      `// Generated by scripts/build-cli.mjs: the library bundle's ${entry === 'main' ? "'stagedroot'" : "'stagedroot/testing'"} names (types: dist/${entry === 'main' ? '' : 'testing/'}index.d.ts).\n` +
        "import { createRequire } from 'node:module';\n\n" +
        `export const { ${list.join(', ')} } = createRequire(import.meta.url)('./load.cjs').library.${entry};\n`,
    );
  }
}

/**
 * Runs each CLI bundle as the bin does (runBundle, under the same name) for verbs of a
 * scratch sysroot, one after the other in one process: the code cache it leaves beside
 * the bundle at exit holds the functions they compiled (the start, the state file, the
 * lock and a transition). run.cjs runs `status` and `mark-good`, then `apply-live` of a
 * second scratch sysroot booted and staged beforehand through the library (tsc's dist/,
 * so that stage's own code stays out of the cache: the bytes a start reads and
 * deserializes follow what the cache holds), its action run by `true`: a live apply then
 * deserializes the merge, the journal and the commit instead of compiling them (not
 * shown to pay yet: the same CPU on the benchmark host, and no clean A/B under TCG,
 * BENCHMARKS.md); boot.cjs `status`,
 * `boot` (with a run and etc directory of the scratch's own: never this machine's
 * /run/stagedroot, so it follows current) and `mark-good`. A build-only driver, bundled
 * to a temp file.
 */
async function writeCodeCaches() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-build-'));
  try {
    const tree = path.join(scratch, 'tree');
    fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=build\n');
    const sysroot = path.join(scratch, 'sysroot');
    const places = { runDir: path.join(scratch, 'run'), etcDir: path.join(scratch, 'etc') };
    const env = { ...process.env, STAGEDROOT_DEBUG: '', STAGEDROOT_CODE_CACHE: '' };
    const init = spawnSync(process.execPath, [path.join(cliDir, 'main.cjs'), 'init', '--from', tree, '--sysroot', sysroot], { encoding: 'utf8', env: { ...env, STAGEDROOT_CODE_CACHE: '0' } });
    const live = await liveScratch(scratch, tree, env);
    const on = (verbs) => verbs.map((v) => [v, '--sysroot', sysroot]);
    const runLines = [...on(['status', 'mark-good']), ...(live === null ? [] : [['apply-live', '--sysroot', live, '--systemctl', 'true']])];
    for (const [file, lines] of [[runFile, runLines], [bootFile, on(['status', 'boot', 'mark-good'])]]) {
      const driver = path.join(scratch, 'cache-driver.cjs');
      await build({
        ...commonJs,
        stdin: {
          contents: `import { runBundle } from './src/cli/code-cache.js';
import { processIo } from './src/cli/io.js';
const cli = runBundle(${JSON.stringify(file)}, { name: ${JSON.stringify(`stagedroot/dist/cli/${path.basename(file)}`)}, sourceMaps: false, env: process.env }) as { main: (argv: string[], io: typeof processIo) => Promise<void> };
void (async () => { for (const argv of ${JSON.stringify(lines)}) { await cli.main(argv, { ...processIo, places: ${JSON.stringify(places)} }); if (process.exitCode) return; } })();
`,
          resolveDir: root,
          sourcefile: 'cache-driver.ts',
          loader: 'ts',
        },
        sourcemap: false,
        outfile: driver,
      });
      const run = init.status === 0 ? spawnSync(process.execPath, [driver], { encoding: 'utf8', env }) : init;
      if (run.status !== 0 || !fs.existsSync(`${file}.v8-cache`)) {
        console.warn(`build-cli: no code cache written for ${path.basename(file)} (the first run of the CLI writes it): ${(run.stderr || run.stdout).trim().slice(-500)}`);
      }
    }
    writeWorkerCache(scratch, env);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The worker bundle's code cache (dist/cli/tree-worker.cjs.v8-cache): a CLI stage on a scratch
 * sysroot of its own (a tree with usr/ files, a symlink and etc/), whose tree workers write it
 * after their tasks (src/fs/jobs/worker-code-cache.ts): the stage's preflight, copy and manifest
 * pass, and its sync. After the CLI's caches, so that the stage's own process writes none of
 * them (run.cjs's then holds what its training ran, not the stage).
 */
function writeWorkerCache(scratch, env) {
  const tree = path.join(scratch, 'worker-tree');
  fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=build\n');
  for (const d of ['usr/lib/a', 'usr/lib/b', 'usr/share/c']) {
    fs.mkdirSync(path.join(tree, d), { recursive: true });
    for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(tree, d, `f${i}`), `${d} ${i}\n`);
  }
  fs.symlinkSync('lib', path.join(tree, 'usr/lib64'));
  const spec = path.join(scratch, 'worker-spec.json');
  fs.writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/motd', contents: 'build\n' }, { path: '/usr/lib/a/f0', contents: 'new\n' }] }));
  const sysroot = path.join(scratch, 'worker-sysroot');
  const bin = path.join(cliDir, 'main.cjs');
  const init = spawnSync(process.execPath, [bin, 'init', '--from', tree, '--sysroot', sysroot], { encoding: 'utf8', env: { ...env, STAGEDROOT_CODE_CACHE: '0' } });
  const stage = init.status === 0 ? spawnSync(process.execPath, [bin, 'stage', spec, '--sysroot', sysroot], { encoding: 'utf8', env }) : init;
  if (stage.status !== 0 || !fs.existsSync(`${workerFile}.v8-cache`)) {
    console.warn(`build-cli: no code cache written for tree-worker.cjs (the first tasks of a worker write it): ${(stage.stderr || stage.stdout).trim().slice(-500)}`);
  }
}

/**
 * A scratch sysroot with a live-decided deployment staged (/etc/containers/policy.json:
 * the MCO's default policy reloads crio.service), booted and staged through the library
 * in its own process; null (with a warning: the cache then lacks apply-live) when that fails.
 */
async function liveScratch(scratch, tree, env) {
  const dir = path.join(scratch, 'live-sysroot');
  const script = `const { Sysroot } = await import(${JSON.stringify(path.join(root, 'dist/index.js'))});
const s = await Sysroot.init(${JSON.stringify(dir)}, { fromDirectory: ${JSON.stringify(tree)} });
await s.boot({ runDir: ${JSON.stringify(path.join(scratch, 'live-run'))} });
await s.stage({ files: [{ path: '/etc/containers/policy.json', contents: '{"default":[{"type":"insecureAcceptAnything"}]}\\n' }] });
const st = s.status();
if (st.deployments.find((d) => d.id === st.staged)?.activation?.mode !== 'live') throw new Error('the scratch stage is not live-decided');`;
  const file = path.join(scratch, 'live-scratch.mjs');
  fs.writeFileSync(file, script);
  const r = spawnSync(process.execPath, [file], { encoding: 'utf8', env });
  if (r.status === 0) return dir;
  console.warn(`build-cli: the code cache of run.cjs is written without apply-live: ${(r.stderr || r.stdout).trim().slice(-500)}`);
  return null;
}
