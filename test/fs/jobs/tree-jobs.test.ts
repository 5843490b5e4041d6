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
import { runTreeTask as runInline, treeWorkersAvailable } from '../../../src/fs/jobs/tree-jobs.js';
import { countingHook } from '../../../src/fs/core/faults.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';
import { DIST_INDEX, requireDist } from '../../helpers/crash.js';

type RunTreeTask = typeof runInline;
let runInWorker: RunTreeTask;
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
  const mod = (await import(path.join(path.dirname(DIST_INDEX), 'fs/jobs/tree-jobs.js'))) as { runTreeTask: RunTreeTask; treeWorkersAvailable: () => boolean };
  runInWorker = mod.runTreeTask;
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
    const ra = await runInline('copyTree', a, { faults: inlineHook });
    const rb = await runInWorker('copyTree', b, { faults: workerHook });
    expect(rb).toEqual(ra);
    expect(hashTree(b.dst)).toBe(hashTree(src));
    expect(fs.readFileSync(b.manifestOut, 'utf8')).toBe(fs.readFileSync(a.manifestOut, 'utf8'));
    expect(workerHook.count).toBeGreaterThan(3000);
    expect(workerHook.ops.map((o) => o.replace(b.dst, 'DST').replace(b.manifestOut, 'MANIFEST'))).toEqual(inlineHook.ops.map((o) => o.replace(a.dst, 'DST').replace(a.manifestOut, 'MANIFEST')));
  });

  it('deliver progress to the caller and leave its event loop free while a worker copies', async () => {
    const seen: number[] = [];
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 1);
    let ticksAtFirstProgress = -1;
    try {
      await runInWorker('copyTree', copyArgs('progress'), {
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
    for (const [name, run] of [['abort-worker', runInWorker], ['abort-inline', runInline]] as const) {
      const ac = new AbortController();
      const args = copyArgs(name);
      let progress = 0;
      const p = run('copyTree', args, {
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

  it('an aborted signal before the start rejects at once', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(runInWorker('hashFile', { file: path.join(src, 'etc/motd') }, { signal: ac.signal })).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('carry typed errors back from the worker', async () => {
    await expect(runInWorker('verifyTree', { tree: src, manifest: path.join(base, 'no-such-manifest') })).rejects.toMatchObject({ name: 'StagedrootError', code: 'STATE_CORRUPT' });
  });
});
