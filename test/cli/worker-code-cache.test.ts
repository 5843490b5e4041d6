import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheHeader as header, copiedCli, expectRewrittenAfterDamage, expectRunsWithUnreplaceableCache } from '../helpers/code-cache-cases.js';

/**
 * The tree workers run their bundle (dist/cli/tree-worker.cjs) from V8's code cache beside it,
 * through the file a worker starts (dist/cli/tree-worker.js: src/cli/tree-worker-entry.ts), and
 * write that cache themselves after their tasks when they ran without one (a worker's exit
 * handlers never run: src/fs/jobs/worker-code-cache.ts). Checked on a copy of the built bin and
 * bundles (never dist/'s own cache), with CLI stages whose tasks run on those workers.
 */
const repo = fileURLToPath(new URL('../..', import.meta.url));
let dir: string;
let bin: string;
let sysroot: string;
let spec: string;
const cacheFile = () => path.join(dir, 'dist/cli/tree-worker.cjs.v8-cache');
const stampOf = () => /^\/\/ stagedroot-bundle (\S+)\n/.exec(fs.readFileSync(path.join(dir, 'dist/cli/tree-worker.cjs'), 'utf8'))?.[1];

/** A stage and its discard, the stage's tasks on workers; returns the stage's output. */
function stageOnce(): string {
  const r = spawnSync(process.execPath, [bin, 'stage', spec, '--sysroot', sysroot], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_DEBUG: '', STAGEDROOT_TREE_WORKERS: '' } });
  expect(r.status, r.stderr).toBe(0);
  const d = spawnSync(process.execPath, [bin, 'discard', '--sysroot', sysroot], { encoding: 'utf8' });
  expect(d.status, d.stderr).toBe(0);
  return r.stdout;
}

beforeAll(() => {
  ({ dir, bin, sysroot } = copiedCli('stagedroot-worker-cache-', repo, ['main.cjs', 'run.cjs', 'run.cjs.v8-cache', 'tree-worker.js', 'tree-worker.cjs'], { 'usr/lib/a': 'a\n' }));
  spec = path.join(dir, 'spec.json');
  fs.writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/motd', contents: 'hi\n' }] }));
  expect(fs.existsSync(cacheFile())).toBe(false); // STAGEDROOT_CODE_CACHE=0: neither read nor written, in the workers too
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the tree workers\' bundle and its V8 code cache', () => {
  it('is written by the workers of a run without one, names the build, and is then kept', () => {
    const expected = stageOnce();
    const bytes = fs.readFileSync(cacheFile());
    expect(stampOf()).toMatch(/^[0-9a-f]{16}$/);
    expect(header(bytes)).toBe(`stagedroot-v8-cache 1 ${stampOf()}\n`);
    expect(bytes.length).toBeGreaterThan(10_000);
    const ino = fs.statSync(cacheFile()).ino;
    const ids = (out: string) => out.replace(/\b\d{4}\b/g, 'ID');
    expect(ids(stageOnce())).toBe(ids(expected)); // the same stage again (under its own id)
    expect(fs.statSync(cacheFile()).ino).toBe(ino); // accepted: not written again
  });

  it('runs the same from a torn cache, another build\'s, bytes V8 rejects or an empty file, and writes a good one again', () => {
    expectRewrittenAfterDamage(cacheFile(), () => void stageOnce());
  });

  it('runs where the cache cannot be replaced, leaving no temp file behind', () => {
    expectRunsWithUnreplaceableCache(cacheFile(), () => void stageOnce());
  });
});
