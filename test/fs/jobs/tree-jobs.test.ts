/**
 * Tree tasks on worker threads (src/fs/jobs/tree-jobs.ts), through one build of the
 * library, the compiled dist/ (a worker runs compiled code; the crash tests' children use
 * the same): on a worker, and inline (STAGEDROOT_TREE_WORKERS=0, what the unit tests get
 * from the TypeScript source), the same results, the same mutations reported to a fault
 * hook on the caller's thread and in the same order, progress on the caller's thread,
 * cancellation by AbortSignal, and a caller whose event loop keeps turning while the tree
 * is copied. No module of src/ is loaded beside dist/'s: one instance of each.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { runTreeTask } from '../../../src/fs/jobs/tree-jobs.js';
import type { treeTasks } from '../../../src/fs/trees/tasks.js';
import type { manifestTasks } from '../../../src/fs/manifests/tasks.js';
import type * as Testing from '../../../src/testing/index.js';
import type { keyless as Keyless } from '../../helpers/manifest.js';
import type { readManifest as ReadManifest } from '../../../src/fs/manifests/manifest.js';
import { DIST_INDEX, requireDist } from '../../helpers/dist.js';

/** The runner and the tasks of dist/, on workers or inline. */
interface Build {
  run: typeof runTreeTask;
  tree: typeof treeTasks;
  manifest: typeof manifestTasks;
}
let inline: Build;
let worker: Build;
let workersInDist: boolean;
let inlineWhenOff: boolean;
let countingHook: typeof Testing.countingHook;
let buildTree: typeof Testing.buildTree;
let hashTree: typeof Testing.hashTree;
let readManifest: typeof ReadManifest;
/** helpers/manifest.ts's keylessEntries, on dist's reader (that helper would load src/'s). */
const keylessEntries = (file: string): ReturnType<typeof Keyless>[] => [...readManifest(file)].map(({ mt: _mt, i: _i, c: _c, ...rest }) => rest);
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
  ({ countingHook, buildTree, hashTree } = (await dist('testing/index.js')) as typeof Testing);
  ({ readManifest } = (await dist('fs/manifests/manifest.js')) as { readManifest: typeof ReadManifest });
  worker = { run: mod.runTreeTask, tree, manifest };
  // The runner decides at each call: with the switch off it runs the task on this thread.
  const off = <T>(fn: () => T): T => {
    const was = process.env.STAGEDROOT_TREE_WORKERS;
    process.env.STAGEDROOT_TREE_WORKERS = '0';
    try {
      return fn();
    } finally {
      if (was === undefined) delete process.env.STAGEDROOT_TREE_WORKERS;
      else process.env.STAGEDROOT_TREE_WORKERS = was;
    }
  };
  inline = { run: ((task, args, o) => off(() => mod.runTreeTask(task, args, o))) as typeof runTreeTask, tree, manifest };
  workersInDist = mod.treeWorkersAvailable();
  inlineWhenOff = !off(() => mod.treeWorkersAvailable());
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
  it('run on a worker thread from dist/, and inline with STAGEDROOT_TREE_WORKERS=0', () => {
    expect(workersInDist).toBe(true);
    expect(inlineWhenOff).toBe(true);
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
