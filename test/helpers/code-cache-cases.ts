import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect } from 'vitest';

/**
 * The cases every V8 code cache of the CLI (its bundles' and the tree workers') must
 * survive: a cache file's first line names the build, and whatever the file holds the
 * run answers the same and writes a good cache again.
 */
export const cacheHeader = (bytes: Buffer): string => bytes.toString('latin1', 0, bytes.indexOf(10) + 1);

/** A torn cache, another build's, bytes V8 rejects under this build's header, and an empty file. */
export function damagedCaches(good: Buffer): Buffer[] {
  return [
    good.subarray(0, Math.floor(good.length / 2)),
    Buffer.concat([Buffer.from('stagedroot-v8-cache 1 0123456789abcdef\n'), good.subarray(cacheHeader(good).length)]),
    Buffer.concat([Buffer.from(cacheHeader(good), 'latin1'), Buffer.alloc(4096, 0x5a)]),
    Buffer.alloc(0),
  ];
}

/** Runs `run` (which asserts its own answer) over each damaged copy of the good cache, then checks the cache was written again whole, no temp file left. */
export function expectRewrittenAfterDamage(cacheFile: string, run: () => void): void {
  const good = fs.readFileSync(cacheFile);
  for (const bad of damagedCaches(good)) {
    fs.writeFileSync(cacheFile, bad);
    run();
    const again = fs.readFileSync(cacheFile);
    expect(cacheHeader(again)).toBe(cacheHeader(good));
    expect(again.length).toBeGreaterThan(10_000);
  }
  expect(fs.readdirSync(path.dirname(cacheFile)).filter((n) => n.includes('.tmp-'))).toEqual([]);
}

/** Runs `run` where the cache cannot be replaced (a non-empty directory in its place): no temp file may be left behind. */
export function expectRunsWithUnreplaceableCache(cacheFile: string, run: () => void): void {
  fs.rmSync(cacheFile, { force: true });
  fs.mkdirSync(cacheFile); // a rename onto a non-empty directory fails
  fs.writeFileSync(path.join(cacheFile, 'x'), '');
  try {
    run();
    expect(fs.readdirSync(path.dirname(cacheFile)).filter((n) => n.includes('.tmp-'))).toEqual([]);
  } finally {
    fs.rmSync(cacheFile, { recursive: true, force: true });
  }
}

/**
 * A copy of the built CLI (these dist/cli files, package.json, node_modules linked) in a
 * temp directory, so that a test never touches dist/'s own caches, and a sysroot made there
 * by `init --from` a small tree (etc/os-release and `extraFiles`) with the caches off.
 */
export function copiedCli(prefix: string, repo: string, files: readonly string[], extraFiles: Record<string, string> = {}): { dir: string; bin: string; sysroot: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.mkdirSync(path.join(dir, 'dist/cli'), { recursive: true });
  for (const f of files) fs.copyFileSync(path.join(repo, 'dist/cli', f), path.join(dir, 'dist/cli', f));
  fs.copyFileSync(path.join(repo, 'package.json'), path.join(dir, 'package.json'));
  fs.symlinkSync(path.join(repo, 'node_modules'), path.join(dir, 'node_modules'));
  const bin = path.join(dir, 'dist/cli/main.cjs');
  const tree = path.join(dir, 'tree');
  for (const [rel, text] of Object.entries({ 'etc/os-release': 'ID=test\n', ...extraFiles })) {
    fs.mkdirSync(path.dirname(path.join(tree, rel)), { recursive: true });
    fs.writeFileSync(path.join(tree, rel), text);
  }
  const sysroot = path.join(dir, 'sysroot');
  const init = spawnSync(process.execPath, [bin, 'init', '--sysroot', sysroot, '--from', tree], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_CODE_CACHE: '0' } });
  expect(init.status, init.stderr).toBe(0);
  return { dir, bin, sysroot };
}
