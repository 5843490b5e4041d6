import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isSubvolume } from '../../src/fs/trees/storage.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const CRASH_CHILD = path.join(here, 'crash-child.mjs');
export const LOCK_HOLDER = path.join(here, 'lock-holder.mjs');
export { DIST_INDEX, requireDist } from './dist.js';

/**
 * A scratch directory for crash tests, on tmpfs (/dev/shm) when there is one. A SIGKILL
 * leaves the page cache intact, so the filesystem under the sysroot does not change what
 * a crash point tests; but every stage ends in `sync -f`, and on a disk shared with
 * other work that flush costs far more than the test itself.
 */
export function scratchDir(prefix: string): string {
  let parent = os.tmpdir();
  try {
    fs.accessSync('/dev/shm', fs.constants.W_OK);
    if (fs.statSync('/dev/shm').isDirectory()) parent = '/dev/shm';
  } catch {
    // no tmpfs: the usual temp dir
  }
  return fs.mkdtempSync(path.join(parent, prefix));
}

export type ChildOp = 'open' | 'stage' | 'stage-rejected' | 'stage-image' | 'stage-file' | 'finalize' | 'apply-live' | 'boot' | 'rollback' | 'markBad' | 'prune';

/** Runs a lifecycle operation in a child process: counting its mutations, or killed after the n-th; `aheadMs`: its clock runs that far ahead. */
export function runChild(dir: string, op: ChildOp, killAfter?: number, aheadMs?: number): ReturnType<typeof spawnSync> {
  return spawnSync(process.execPath, [CRASH_CHILD, JSON.stringify({ dir, op, killAfter, aheadMs })], { encoding: 'utf8', timeout: 60_000 });
}

/** The mutating calls `op` makes on `dir` (counted on a copy, so `dir` is unchanged). */
export function countMutations(dir: string, op: ChildOp): string[] {
  const countDir = `${dir}.count`;
  copySysroot(dir, countDir);
  try {
    const r = runChild(countDir, op);
    if (r.status !== 0) throw new Error(`counting ${op} failed: ${r.stderr}`);
    return (JSON.parse(String(r.stdout)) as { ops: string[] }).ops;
  } finally {
    fs.rmSync(countDir, { recursive: true, force: true });
  }
}

/**
 * Kills `op` on `dir` right after its first mutating call that matches `at`, leaving
 * the sysroot as a crash there leaves it.
 */
export function crashAt(dir: string, op: ChildOp, at: RegExp): void {
  const ops = countMutations(dir, op);
  const n = ops.findIndex((o) => at.test(o)) + 1;
  if (n === 0) throw new Error(`${op} makes no mutation matching ${at}: ${ops.join(', ')}`);
  const k = runChild(dir, op, n);
  if (k.signal !== 'SIGKILL') throw new Error(`${op} was not killed at ${n}: ${k.stderr}`);
}

/**
 * Copies a sysroot; cp -a keeps the hardlinks shared between deployments (usr/), as on a
 * real one. On btrfs, trees that are subvolumes are snapshotted into the copy, so that
 * the copy stores its trees as the original does.
 */
export function copySysroot(from: string, to: string): void {
  fs.rmSync(to, { recursive: true, force: true });
  const r = spawnSync('cp', ['-a', from, to], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cp -a ${from} ${to} failed: ${r.stderr}`);
  copyBootDir(from, to);
  for (const sub of ['deploy', 'work', 'trash']) {
    for (const id of fs.existsSync(path.join(from, sub)) ? fs.readdirSync(path.join(from, sub)) : []) {
      const tree = path.join(from, sub, id, 'tree');
      if (!isSubvolume(tree)) continue;
      const copy = path.join(to, sub, id, 'tree');
      fs.rmSync(copy, { recursive: true, force: true });
      const s = spawnSync('btrfs', ['subvolume', 'snapshot', tree, copy], { encoding: 'utf8' });
      if (s.status !== 0) throw new Error(`btrfs subvolume snapshot ${tree} ${copy} failed: ${s.stderr}`);
    }
  }
}

/** Starts a process that holds the sysroot's lock for `holdMs`; resolves once it holds it. */
export async function holdLock(dir: string, holdMs: number | 'until-released'): Promise<ChildProcess> {
  const child = spawn(process.execPath, [LOCK_HOLDER, dir, holdMs === 'until-released' ? 'stdin' : String(holdMs)], { stdio: [holdMs === 'until-released' ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().startsWith('locked') && resolve());
    child.on('exit', (code) => reject(new Error(`lock holder exited (${code}) before holding the lock: ${err}`)));
  });
  return child;
}

/** Tells a holder started with 'until-released' to release the lock; resolves once it has. */
export function releaseLock(holder: ChildProcess): Promise<void> {
  const released = new Promise<void>((resolve) => holder.stdout!.on('data', (d: Buffer) => d.toString().includes('released') && resolve()));
  holder.stdin!.end('release\n');
  return released;
}

/** Waits for a child to exit; resolves with its signal (or null). */
export function exited(child: ChildProcess): Promise<NodeJS.Signals | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.signalCode);
  return new Promise((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
}

/** A child running a sequence of operations (crash-child.mjs --sequence), loaded and waiting for `go`. */
export interface SequenceChild {
  readonly child: ChildProcess;
  /** The lines it wrote so far ("begin OP", "end OP MS RESULT", "done"). */
  readonly lines: string[];
  /** Starts the operations on `dir`; resolves with the time it was sent (performance.now()). */
  go(dir: string, ops: readonly string[], o?: { pauseMs?: number; waitSeconds?: number }): number;
  /** Resolves once it has exited and its output is read: exit code or signal, stderr. */
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

/**
 * Starts crash-child.mjs in sequence mode and resolves once the library is loaded, so
 * that the time of a kill falls in the operations rather than in Node's startup.
 */
export function startSequence(script: string = CRASH_CHILD): Promise<SequenceChild> {
  const child = spawn(process.execPath, [script, '--sequence'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  let partial = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stderr }));
  });
  child.stdin!.on('error', () => {}); // killed before it read `go`
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      const parts = (partial + d.toString()).split('\n');
      partial = parts.pop()!;
      for (const l of parts) {
        if (l === 'ready') {
          resolve({
            child,
            lines,
            go: (dir, ops, o = {}) => {
              child.stdin!.end(JSON.stringify({ dir, ops, ...o }) + '\n');
              return performance.now();
            },
            exit,
          });
        } else lines.push(l);
      }
    });
    void exit.then((e) => reject(new Error(`sequence child exited (${e.code ?? e.signal}) before it was ready: ${e.stderr}`)));
  });
}

/**
 * crash-child.mjs and the compiled library bundled into one file under `dir`: the same
 * code, but Node loads one module instead of a few hundred, which roughly halves a
 * child's startup (~0.25 s instead of ~0.4 s of CPU here). Tests that start hundreds of
 * children use it. The bundler is rolldown, which vite (a devDependency) brings; without
 * it the unbundled child is used, slower, and a warning says so.
 */
export async function bundledCrashChild(dir: string): Promise<string> {
  // Native addons (@napi-rs/xattr) cannot be bundled: they stay imports, resolved from the
  // repository's node_modules, so the bundle is written below it rather than in `dir`.
  void dir;
  const cache = path.join(here, '..', '..', 'node_modules', '.cache');
  fs.mkdirSync(cache, { recursive: true });
  const out = path.join(fs.mkdtempSync(path.join(cache, 'crash-child-')), 'crash-child.bundle.mjs');
  try {
    const { build } = await import('rolldown');
    // One file (codeSplitting off): the library loads its verbs' modules with import().
    await build({ input: CRASH_CHILD, platform: 'node', logLevel: 'silent', external: [/^@napi-rs\//], output: { file: out, format: 'esm', codeSplitting: false } });
    return out;
  } catch (err) {
    console.warn(`crash-child not bundled (${(err as Error).message.split('\n')[0]}): the children start slower`);
    return CRASH_CHILD;
  }
}

/**
 * A sysroot's boot directory lives beside it (`DIR.boot`, see bootDirOf): the copy gets
 * its own, and its state (which names the boot directory by path) is pointed at it.
 */
function copyBootDir(from: string, to: string): void {
  const boot = bootDirOf(from);
  if (!fs.existsSync(boot)) return;
  fs.rmSync(bootDirOf(to), { recursive: true, force: true });
  const r = spawnSync('cp', ['-a', boot, bootDirOf(to)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cp -a ${boot} failed: ${r.stderr}`);
  for (const f of ['state.json', 'state.json.bak']) {
    const file = path.join(to, f);
    if (!fs.existsSync(file)) continue;
    const text = fs.readFileSync(file, 'utf8').split(`/${path.basename(from)}.boot"`).join(`/${path.basename(to)}.boot"`);
    fs.writeFileSync(file, text);
  }
}

/** Where the crash tests keep a sysroot's boot directory (beside it, on the same filesystem). */
export function bootDirOf(sysroot: string): string {
  return `${sysroot}.boot`;
}
