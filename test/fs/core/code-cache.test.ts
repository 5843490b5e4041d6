import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The CLI bundle runs from V8's code cache beside it (src/fs/core/code-cache.ts). Checked
 * on a copy of the built bin and bundle (so that the tests never touch dist/'s own cache):
 * whatever the cache is (absent, torn, another build's, rejected by V8, unreplaceable),
 * the CLI runs and answers the same, and a cache that was not used is written again.
 */
const repo = fileURLToPath(new URL('../../..', import.meta.url));
let dir: string;
let bin: string;
let cacheFile: string;
let sysroot: string;
let expected: string;

function status(args: string[] = [], preload?: string): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [...(preload ? ['-r', preload] : []), bin, 'status', '--sysroot', sysroot, ...args], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_DEBUG: '' } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
const header = (bytes: Buffer) => bytes.toString('latin1', 0, bytes.indexOf(10) + 1);
const stampOf = () => /^\/\/ stagedroot-bundle (\S+)\n/.exec(fs.readFileSync(path.join(dir, 'dist/cli/run.cjs'), 'utf8'))?.[1];

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-code-cache-'));
  fs.mkdirSync(path.join(dir, 'dist/cli'), { recursive: true });
  for (const f of ['main.cjs', 'run.cjs', 'run.cjs.map']) fs.copyFileSync(path.join(repo, 'dist/cli', f), path.join(dir, 'dist/cli', f));
  fs.copyFileSync(path.join(repo, 'package.json'), path.join(dir, 'package.json'));
  fs.symlinkSync(path.join(repo, 'node_modules'), path.join(dir, 'node_modules'));
  bin = path.join(dir, 'dist/cli/main.cjs');
  cacheFile = path.join(dir, 'dist/cli/run.cjs.v8-cache');
  const tree = path.join(dir, 'tree');
  fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=test\n');
  sysroot = path.join(dir, 'sysroot');
  const init = spawnSync(process.execPath, [bin, 'init', '--sysroot', sysroot, '--from', tree], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_CODE_CACHE: '0' } });
  expect(init.status, init.stderr).toBe(0);
  expect(fs.existsSync(cacheFile)).toBe(false); // STAGEDROOT_CODE_CACHE=0: neither read nor written
  const plain = spawnSync(process.execPath, [bin, 'status', '--sysroot', sysroot], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_CODE_CACHE: '0' } });
  expect(plain.status, plain.stderr).toBe(0);
  expected = plain.stdout;
  expect(expected).toContain('0001');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the CLI bundle and its V8 code cache', () => {
  it('writes the cache after a run without one, names the build in it, and then keeps it', () => {
    fs.rmSync(cacheFile, { force: true });
    expect(status()).toEqual({ code: 0, out: expected, err: '' });
    const bytes = fs.readFileSync(cacheFile);
    expect(stampOf()).toMatch(/^[0-9a-f]{16}$/);
    expect(header(bytes)).toBe(`stagedroot-v8-cache 1 ${stampOf()}\n`);
    expect(bytes.length).toBeGreaterThan(10_000);
    const ino = fs.statSync(cacheFile).ino;
    expect(status()).toEqual({ code: 0, out: expected, err: '' });
    expect(fs.statSync(cacheFile).ino).toBe(ino); // accepted: not written again
  });

  it('runs the same from a torn cache, another build\'s cache or bytes V8 rejects, and writes a good one again', () => {
    const good = (status(), fs.readFileSync(cacheFile));
    const torn = good.subarray(0, Math.floor(good.length / 2));
    const otherBuild = Buffer.concat([Buffer.from('stagedroot-v8-cache 1 0123456789abcdef\n'), good.subarray(header(good).length)]);
    const garbage = Buffer.concat([Buffer.from(header(good), 'latin1'), Buffer.alloc(4096, 0x5a)]);
    for (const bad of [torn, otherBuild, garbage, Buffer.alloc(0)]) {
      fs.writeFileSync(cacheFile, bad);
      expect(status()).toEqual({ code: 0, out: expected, err: '' });
      const again = fs.readFileSync(cacheFile);
      expect(header(again)).toBe(header(good));
      expect(again.length).toBeGreaterThan(10_000);
    }
    expect(fs.readdirSync(path.dirname(cacheFile)).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });

  it('runs where the cache cannot be replaced, leaving no temp file behind', () => {
    fs.rmSync(cacheFile, { force: true });
    fs.mkdirSync(cacheFile); // a rename onto a non-empty directory fails
    fs.writeFileSync(path.join(cacheFile, 'x'), '');
    try {
      expect(status()).toEqual({ code: 0, out: expected, err: '' });
      expect(fs.readdirSync(path.dirname(cacheFile)).filter((n) => n.includes('.tmp-'))).toEqual([]);
    } finally {
      fs.rmSync(cacheFile, { recursive: true, force: true });
    }
  });

  it('names the bundle stagedroot/dist/cli/run.cjs in stacks, wherever the package is and wherever its cache was made', () => {
    // The cache made in the build's dist/ runs here too (V8 keeps the name a script was compiled with).
    fs.copyFileSync(path.join(repo, 'dist/cli/run.cjs.v8-cache'), cacheFile);
    const preload = path.join(dir, 'stack-on-write.cjs');
    fs.writeFileSync(preload, "const w = process.stdout.write.bind(process.stdout);\nprocess.stdout.write = (t, ...a) => { process.stderr.write(new Error('here').stack + '\\n'); return w(t, ...a); };\n");
    for (let i = 0; i < 2; i++) {
      const r = status([], preload);
      expect(r.code, r.err).toBe(0);
      expect(r.err).toMatch(/\(stagedroot\/dist\/cli\/run\.cjs:\d+:\d+\)/);
      expect(r.err).not.toContain(repo);
      expect(r.err).not.toContain(path.join(dir, 'dist'));
    }
  });

  it('with --debug, loads the bundle through Node\'s require: stacks name the TypeScript sources', () => {
    // A stdout that throws: an unexpected error from inside the CLI's status verb.
    const preload = path.join(dir, 'throwing-stdout.cjs');
    fs.writeFileSync(preload, "const w = process.stdout.write.bind(process.stdout);\nprocess.stdout.write = (t, ...a) => { if (String(t).startsWith('sysroot')) throw new TypeError('boom'); return w(t, ...a); };\n");
    const debug = status(['--debug'], preload);
    expect(debug.code).toBe(1);
    expect(debug.err).toContain('stagedroot: INTERNAL: boom');
    expect(debug.err).toMatch(/at .*src\/cli\/commands\/status\.ts:\d+:\d+/);
    const plain = status([], preload);
    expect(plain).toEqual({ code: 1, out: '', err: 'stagedroot: INTERNAL: boom\n' });
  });
});
