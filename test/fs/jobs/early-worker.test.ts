/**
 * The tree worker the bin starts before it loads the CLI's bundle (src/fs/jobs/early-worker.ts):
 * taken once by the worker file it was started for, never where tasks run inline, never
 * once it died; unref'd, so a command line that takes none exits as without it.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startEarlyTreeWorker, takeEarlyTreeWorker } from '../../../src/fs/jobs/early-worker.js';
import { startsTreeWork } from '../../../src/cli/boot-path.js';
import { CLI } from '../../helpers/cli.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-early-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const echo = path.join(dir, 'echo.mjs');
fs.writeFileSync(echo, "import { parentPort } from 'node:worker_threads'; parentPort.on('message', (m) => parentPort.postMessage(m));\n");
const broken = path.join(dir, 'broken.mjs');
fs.writeFileSync(broken, "throw new Error('no');\n");

describe('the early tree worker', () => {
  it('is taken once, by the worker file it was started for, and runs', async () => {
    const url = pathToFileURL(echo);
    startEarlyTreeWorker(url, {});
    expect(takeEarlyTreeWorker(pathToFileURL(broken))).toBeUndefined();
    const w = takeEarlyTreeWorker(url)!;
    expect(w).toBeDefined();
    expect(takeEarlyTreeWorker(url)).toBeUndefined();
    w.ref();
    const back = await new Promise((resolve) => {
      w.once('message', resolve);
      w.postMessage('hi');
    });
    expect(back).toBe('hi');
    await w.terminate();
  });

  it('is not started where tasks run inline (STAGEDROOT_TREE_WORKERS=0), and not handed out once it died', async () => {
    startEarlyTreeWorker(pathToFileURL(echo), { STAGEDROOT_TREE_WORKERS: '0' });
    expect(takeEarlyTreeWorker(pathToFileURL(echo))).toBeUndefined();
    startEarlyTreeWorker(pathToFileURL(broken), {});
    // The slot the bin and the bundle share: wait for the broken worker's exit there.
    const early = (globalThis as unknown as Record<symbol, { worker: import('node:worker_threads').Worker } | undefined>)[Symbol.for('stagedroot.earlyTreeWorker')];
    expect(early).toBeDefined();
    await new Promise((resolve) => early!.worker.once('exit', resolve));
    expect(takeEarlyTreeWorker(pathToFileURL(broken))).toBeUndefined();
  });

  it('does not keep a process alive that never takes it (dist/)', () => {
    const mod = pathToFileURL(path.resolve('dist/fs/jobs/early-worker.js')).href;
    const script = `import { startEarlyTreeWorker } from ${JSON.stringify(mod)}; startEarlyTreeWorker(new URL(${JSON.stringify(pathToFileURL(echo).href)}), {}); console.log('done');`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('done\n');
  });

  it('is started by the bin for the verbs that copy a tree (verbs.ts treeWork), not for their help', () => {
    expect(startsTreeWork(['stage', 'x.ign'])).toBe(true);
    expect(startsTreeWork(['--debug', 'switch', 'docker://x'])).toBe(true);
    expect(startsTreeWork(['init', '--from', 'tree'])).toBe(true);
    expect(startsTreeWork(['stage', '--help'])).toBe(false);
    expect(startsTreeWork(['status'])).toBe(false);
    expect(startsTreeWork(['finalize'])).toBe(false);
    expect(startsTreeWork([])).toBe(false);
  });

  it('is the first worker a CLI stage runs its tasks on: a copy in two parts starts one worker more, not two (dist/)', () => {
    const tree = path.join(dir, 'tree');
    fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(tree, 'etc/os-release'), 'ID=test\n');
    fs.mkdirSync(path.join(tree, 'usr/lib'), { recursive: true });
    fs.writeFileSync(path.join(tree, 'usr/lib/a'), 'a\n');
    const sysroot = path.join(dir, 'sysroot');
    const spec = path.join(dir, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/motd', contents: 'hi\n' }] }));
    // Counts the worker threads the process starts (the bin's early one and tree-jobs.ts's), each by its file.
    const count = path.join(dir, 'count-workers.cjs');
    fs.writeFileSync(count, "const wt = require('node:worker_threads');\nif (wt.isMainThread) { const W = wt.Worker; const files = []; wt.Worker = class extends W { constructor(f, ...a) { super(f, ...a); files.push(String(f)); } }; process.on('exit', () => require('node:fs').writeSync(2, `workers: ${JSON.stringify(files)}\\n`)); }\n");
    const run = (args: string[]) => spawnSync(process.execPath, ['-r', count, CLI, ...args, '--sysroot', sysroot], { encoding: 'utf8', env: { ...process.env, STAGEDROOT_COPY_PARTS: '2', STAGEDROOT_TREE_WORKERS: '' } });
    const started = (stderr: string) => JSON.parse(/workers: (.*)\n/.exec(stderr)![1]!) as string[];
    const init = run(['init', '--from', tree]);
    expect(init.status, init.stderr).toBe(0);
    const r = run(['stage', spec]);
    expect(r.status, r.stderr).toBe(0);
    // The early worker and the copy's second part's: before, the early one was never taken and two more started.
    expect(started(r.stderr)).toHaveLength(2);
    expect(new Set(started(r.stderr).map((f) => path.basename(f)))).toEqual(new Set(['tree-worker.js']));
  });
});
