/**
 * Tree tasks on worker threads (src/fs/jobs/tree-jobs.ts). The unit tests run the library
 * from its TypeScript source, where tasks run inline; the worker path is exercised
 * through the compiled dist/ (as the crash tests' children use it): the same results,
 * the same mutations reported to a fault hook on the caller's thread and in the same
 * order, progress on the caller's thread, cancellation by AbortSignal, and a caller
 * whose event loop keeps turning while the tree is copied.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTreeTask, treeWorkersAvailable } from '../../../src/fs/jobs/tree-jobs.js';
import { treeTasks } from '../../../src/fs/trees/tasks.js';
import { manifestTasks } from '../../../src/fs/manifests/tasks.js';
import { countingHook } from '../../../src/testing/faults.js';
import { keylessEntries } from '../../helpers/manifest.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';
import { DIST_INDEX, requireDist } from '../../helpers/crash.js';

/** The runner and the tasks of one build: the TypeScript source (inline) or dist/ (on workers). */
interface Build {
  run: typeof runTreeTask;
  tree: typeof treeTasks;
  manifest: typeof manifestTasks;
}
const inline: Build = { run: runTreeTask, tree: treeTasks, manifest: manifestTasks };
let worker: Build;
let workersInDist: boolean;
let base: string;
let src: string;

/** A tree of `n` small files in a few directories, plus a private etc/. */
function wideTree(root: string, n: number): string {
  const spec: Record<string, string> = { 'etc/hostname': 'node\n', 'etc/motd': 'hi\n' };
  for (let i = 0; i < n; i++) spec[`usr/lib/d${i % 20}/f${i}`] = `file ${i}\n`;
  return buildTree(root, spec);
}

beforeAll(async () => {
  requireDist();
  const dist = (rel: string): Promise<unknown> => import(path.join(path.dirname(DIST_INDEX), rel));
  const mod = (await dist('fs/jobs/tree-jobs.js')) as { runTreeTask: typeof runTreeTask; treeWorkersAvailable: () => boolean };
  const tree = ((await dist('fs/trees/tasks.js')) as { treeTasks: typeof treeTasks }).treeTasks;
  const manifest = ((await dist('fs/manifests/tasks.js')) as { manifestTasks: typeof manifestTasks }).manifestTasks;
  worker = { run: mod.runTreeTask, tree, manifest };
  workersInDist = mod.treeWorkersAvailable();
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-tree-jobs-'));
  src = wideTree(path.join(base, 'src'), 3000);
});

afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

const policy = { hardlinkPrefixes: ['usr'], mode: 'reflink' as const };

function copyArgs(name: string): { src: string; dst: string; policy: typeof policy; manifestOut: string } {
  const dst = path.join(base, name);
  fs.mkdirSync(dst);
  return { src, dst, policy, manifestOut: path.join(base, `${name}.manifest`) };
}

describe('tree tasks', () => {
  it('run inline from the TypeScript source and on a worker thread from dist/', () => {
    expect(treeWorkersAvailable()).toBe(false);
    expect(workersInDist).toBe(true);
  });

  it('copy the same tree and write the same manifest on a worker as inline, reporting the same mutations in the same order', async () => {
    const inlineHook = countingHook();
    const workerHook = countingHook();
    const a = copyArgs('inline');
    const b = copyArgs('worker');
    const ra = await inline.run(inline.tree.copyTree, a, { faults: inlineHook });
    const rb = await worker.run(worker.tree.copyTree, b, { faults: workerHook });
    expect(rb).toEqual(ra);
    expect(hashTree(b.dst)).toBe(hashTree(src));
    expect(keylessEntries(b.manifestOut)).toEqual(keylessEntries(a.manifestOut));
    expect(workerHook.count).toBeGreaterThan(3000);
    expect(workerHook.ops.map((o) => o.replace(b.dst, 'DST').replace(b.manifestOut, 'MANIFEST'))).toEqual(inlineHook.ops.map((o) => o.replace(a.dst, 'DST').replace(a.manifestOut, 'MANIFEST')));
  });

  it('deliver progress to the caller and leave its event loop free while a worker copies', async () => {
    const seen: number[] = [];
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 1);
    let ticksAtFirstProgress = -1;
    try {
      await worker.run(worker.tree.copyTree, copyArgs('progress'), {
        onProgress: (p: { done: number }) => {
          if (ticksAtFirstProgress < 0) ticksAtFirstProgress = ticks;
          seen.push(p.done);
        },
      });
    } finally {
      clearInterval(timer);
    }
    expect(seen.length).toBeGreaterThan(2);
    expect(seen.at(-1)).toBeGreaterThan(3000);
    expect([...seen].sort((x, y) => x - y)).toEqual(seen);
    // Timers fired while the copy was under way (an inline copy holds the loop until it ends).
    expect(ticks).toBeGreaterThan(0);
  });

  it('stop when the AbortSignal fires: ABORTED, on a worker and inline', async () => {
    for (const [name, build] of [['abort-worker', worker], ['abort-inline', inline]] as const) {
      const ac = new AbortController();
      const args = copyArgs(name);
      let progress = 0;
      const p = build.run(build.tree.copyTree, args, {
        signal: ac.signal,
        onProgress: () => {
          progress += 1;
          ac.abort();
        },
        // Inline, the walk runs on this thread: the fault hook aborts after the first 100 mutations.
        faults: { afterMutation: () => void (++progress > 100 && ac.abort()) },
      });
      await expect(p, name).rejects.toMatchObject({ code: 'ABORTED' });
      const copied = (fs.readdirSync(args.dst, { recursive: true }) as string[]).length;
      expect(copied, name).toBeLessThan(3000);
    }
  });

  it('run every task of trees and manifests on a worker (found by the module that defines it) with the results of inline', async () => {
    const a = copyArgs('tasks-a');
    await inline.run(inline.tree.copyTree, a);
    fs.writeFileSync(path.join(a.dst, 'etc/motd'), 'changed\n');
    const b = copyArgs('tasks-b');
    await inline.run(inline.tree.copyTree, b);
    const checks: [string, (x: Build) => Promise<unknown>][] = [
      ['hashFile', (x) => x.run(x.manifest.hashFile, { file: a.manifestOut })],
      ['diffManifests', (x) => x.run(x.manifest.diffManifests, { a: a.manifestOut, b: b.manifestOut })],
      ['sumFileSizes', (x) => x.run(x.manifest.sumFileSizes, { manifest: a.manifestOut, prefixes: ['usr'] })],
      ['verifyTree', (x) => x.run(x.manifest.verifyTree, { tree: a.dst, manifest: a.manifestOut })],
    ];
    for (const [name, run] of checks) {
      const [wi, ww] = [await run(inline), await run(worker)];
      expect(ww, name).toEqual(wi);
    }
    expect(await worker.run(worker.manifest.verifyTree, { tree: a.dst, manifest: a.manifestOut })).toMatchObject([{ path: 'etc/motd' }]);
    for (const build of [inline, worker]) {
      const made = path.join(base, `made-${build === inline ? 'inline' : 'worker'}`);
      await build.run(build.tree.makeTree, { kind: 'portable', path: made });
      expect(fs.statSync(made).isDirectory()).toBe(true);
      await build.run(build.tree.syncFilesystem, { path: made, env: { ...process.env } });
      await build.run(build.tree.removeTree, { path: made });
      expect(fs.existsSync(made)).toBe(false);
    }
  });

  it('an aborted signal before the start rejects at once', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(worker.run(worker.manifest.hashFile, { file: path.join(src, 'etc/motd') }, { signal: ac.signal })).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('carry typed errors back from the worker', async () => {
    await expect(worker.run(worker.manifest.verifyTree, { tree: src, manifest: path.join(base, 'no-such-manifest') })).rejects.toMatchObject({ name: 'StagedrootError', code: 'STATE_CORRUPT' });
  });
});
