import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheHeader as header, copiedCli, expectRewrittenAfterDamage, expectRunsWithUnreplaceableCache } from '../helpers/code-cache-cases.js';

/**
 * The CLI's bundles run from V8's code cache beside each (src/cli/code-cache.ts): the
 * boot bundle (dist/cli/boot.cjs: `status` here) and the full one (dist/cli/run.cjs:
 * `trust list`). Checked on a copy of the built bin and bundles (so that the tests never
 * touch dist/'s own caches): whatever a cache is (absent, torn, another build's, rejected
 * by V8, unreplaceable), the CLI runs and answers the same, and a cache that was not used
 * is written again.
 */
const repo = fileURLToPath(new URL('../..', import.meta.url));
let dir: string;
let bin: string;
let sysroot: string;

const BUNDLES = [
  { bundle: 'boot.cjs', verb: ['status'], first: 'sysroot', source: 'src/cli/commands/status.ts' },
  { bundle: 'run.cjs', verb: ['trust', 'list'], first: 'no trusted keys', source: 'src/cli/commands/trust.ts' },
] as const;

function runVerb(verb: readonly string[], args: string[] = [], preload?: string, env: NodeJS.ProcessEnv = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [...(preload ? ['-r', preload] : []), bin, ...verb, '--sysroot', sysroot, ...args], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_DEBUG: '', ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

beforeAll(() => {
  ({ dir, bin, sysroot } = copiedCli('stagedroot-code-cache-', repo, ['main.cjs', 'run.cjs', 'run.cjs.map', 'boot.cjs', 'boot.cjs.map']));
  for (const { bundle } of BUNDLES) expect(fs.existsSync(path.join(dir, 'dist/cli', `${bundle}.v8-cache`))).toBe(false); // STAGEDROOT_CODE_CACHE=0: neither read nor written
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const { bundle, verb, first, source } of BUNDLES) {
  describe(`the CLI bundle ${bundle} and its V8 code cache`, () => {
    const cacheFile = () => path.join(dir, 'dist/cli', `${bundle}.v8-cache`);
    const stampOf = () => /^\/\/ stagedroot-bundle (\S+)\n/.exec(fs.readFileSync(path.join(dir, 'dist/cli', bundle), 'utf8'))?.[1];
    const status = (args: string[] = [], preload?: string) => runVerb(verb, args, preload);
    let expected: string;
    beforeAll(() => {
      const plain = runVerb(verb, [], undefined, { STAGEDROOT_CODE_CACHE: '0' });
      expect(plain.code, plain.err).toBe(0);
      expected = plain.out;
      expect(expected).toContain(first);
    });

    it('writes the cache after a run without one, names the build in it, and then keeps it', () => {
      fs.rmSync(cacheFile(), { force: true });
      expect(status()).toEqual({ code: 0, out: expected, err: '' });
      const bytes = fs.readFileSync(cacheFile());
      expect(stampOf()).toMatch(/^[0-9a-f]{16}$/);
      expect(header(bytes)).toBe(`stagedroot-v8-cache 1 ${stampOf()}\n`);
      expect(bytes.length).toBeGreaterThan(10_000);
      const ino = fs.statSync(cacheFile()).ino;
      expect(status()).toEqual({ code: 0, out: expected, err: '' });
      expect(fs.statSync(cacheFile()).ino).toBe(ino); // accepted: not written again
    });

    it('runs the same from a torn cache, another build\'s cache, bytes V8 rejects or an empty file, and writes a good one again', () => {
      status();
      expectRewrittenAfterDamage(cacheFile(), () => expect(status()).toEqual({ code: 0, out: expected, err: '' }));
    });

    it('runs where the cache cannot be replaced, leaving no temp file behind', () => {
      expectRunsWithUnreplaceableCache(cacheFile(), () => expect(status()).toEqual({ code: 0, out: expected, err: '' }));
    });

    it(`names the bundle stagedroot/dist/cli/${bundle} in stacks, wherever the package is and wherever its cache was made`, () => {
      // The cache made in the build's dist/ runs here too (V8 keeps the name a script was compiled with).
      fs.copyFileSync(path.join(repo, 'dist/cli', `${bundle}.v8-cache`), cacheFile());
      const preload = path.join(dir, 'stack-on-write.cjs');
      // The CLI writes its output with fs.writeSync (src/cli/io.ts): a stack at each write to fd 1.
      fs.writeFileSync(preload, "const fs = require('fs'); const w = fs.writeSync;\nfs.writeSync = function (fd, ...a) { if (fd === 1) w(2, new Error('here').stack + '\\n'); return w.call(this, fd, ...a); };\n");
      for (let i = 0; i < 2; i++) {
        const r = status([], preload);
        expect(r.code, r.err).toBe(0);
        expect(r.err).toContain(`(stagedroot/dist/cli/${bundle}:`);
        expect(r.err).not.toContain(repo);
        expect(r.err).not.toContain(path.join(dir, 'dist'));
      }
    });

    it('with --debug, loads the bundle through Node\'s require: stacks name the TypeScript sources', () => {
      // A write to stdout that throws: an unexpected error from inside the verb.
      const preload = path.join(dir, `throwing-stdout-${bundle}.cjs`);
      fs.writeFileSync(preload, `const fs = require('fs'); const w = fs.writeSync;\nfs.writeSync = function (fd, b, ...a) { if (fd === 1 && String(b).startsWith(${JSON.stringify(first)})) throw new TypeError('boom'); return w.call(this, fd, b, ...a); };\n`);
      const debug = status(['--debug'], preload);
      expect(debug.code).toBe(1);
      expect(debug.err).toContain('stagedroot: INTERNAL: boom');
      expect(debug.err).toMatch(new RegExp(`at .*${source.replace(/\./g, '\\.')}:\\d+:\\d+`));
      const plain = status([], preload);
      expect(plain).toEqual({ code: 1, out: '', err: 'stagedroot: INTERNAL: boom\n' });
    });
  });
}
