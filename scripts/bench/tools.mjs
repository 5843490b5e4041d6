/** External commands for the benchmark: installing the reference tools, running and timing them. */
import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { spawnSync } from 'node:child_process';

/** Runs a command; throws with its stderr when it fails. Returns stdout. */
export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}: ${(r.stderr || r.stdout || '').trim().slice(-2000)}`);
  return r.stdout;
}

/** Wall-clock milliseconds of one command. */
export function timeCmd(cmd, args, opts = {}) {
  const t0 = performance.now();
  const out = run(cmd, args, opts);
  return { ms: performance.now() - t0, out };
}

export function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0;
}

/**
 * Makes sure the reference tools are installed, from Debian's packages when missing
 * (apt-get update first). Never fails: returns what is available and, for what is not,
 * why, so the benchmark can say so and go on without it.
 */
export function ensureTools(wanted, log) {
  const available = {};
  const notes = [];
  const missing = wanted.filter((t) => !has(t.cmd));
  for (const t of wanted) available[t.cmd] = !missing.includes(t);
  if (missing.length === 0) return { available, notes };
  const pkgs = missing.map((t) => t.pkg);
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot) {
    for (const t of missing) notes.push(`${t.cmd} is not installed and the benchmark is not running as root, so it cannot run \`apt-get install ${t.pkg}\`: its comparison is skipped`);
    return { available, notes };
  }
  if (!has('apt-get')) {
    for (const t of missing) notes.push(`${t.cmd} is not installed and there is no apt-get to install ${t.pkg}: its comparison is skipped`);
    return { available, notes };
  }
  log(`installing ${pkgs.join(', ')} with apt-get (missing: ${missing.map((t) => t.cmd).join(', ')})`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const upd = spawnSync('apt-get', ['update', '-q'], { encoding: 'utf8', env });
  const inst = upd.status === 0 ? spawnSync('apt-get', ['install', '-y', '-q', ...pkgs], { encoding: 'utf8', env }) : null;
  for (const t of missing) {
    available[t.cmd] = has(t.cmd);
    if (!available[t.cmd]) {
      const why = upd.status !== 0 ? `apt-get update failed: ${(upd.stderr || '').trim().split('\n').pop()}` : `apt-get install ${t.pkg} failed: ${(inst?.stderr || '').trim().split('\n').pop()}`;
      notes.push(`${t.cmd} could not be installed (${why}): its comparison is skipped`);
    } else {
      notes.push(`${t.cmd} was installed from Debian's ${t.pkg} package for this run`);
    }
  }
  return { available, notes };
}

/** Flushes dirty pages so that one measurement does not pay for the writeback of the previous one. */
/**
 * Before each timed operation: `sync`, then wait until the block devices are idle (their
 * /proc/diskstats lines unchanged over 300 ms; at most 60 s). On a filesystem mounted
 * with `discard` (this machine's root), the discards of a big deletion (a pruned or
 * discarded 100,000-file tree, a reference copy removed) go on after `sync` returns and
 * slowed whatever ran next by up to 3×: without the wait, the operation that follows a
 * deletion pays for it, and in a round that is more often stage than `cp -al`.
 */
export function settle() {
  run('sync', []);
  const snapshot = () => {
    try {
      return fs.readFileSync('/proc/diskstats', 'utf8').split('\n').filter((l) => !/\s(ram|zram)\d/.test(l)).join('\n');
    } catch {
      return null;
    }
  };
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 60_000;
  let prev = snapshot();
  while (prev !== null && Date.now() < until) {
    Atomics.wait(cell, 0, 0, 300);
    const now = snapshot();
    if (now === prev) return;
    prev = now;
  }
}

export function versionOf(cmd, args = ['--version']) {
  try {
    return run(cmd, args).split('\n').find((l) => l.trim() !== '')?.trim() ?? '?';
  } catch {
    return '?';
  }
}

/** The copy policy a stage uses by default: hardlink usr/, reflink-or-copy the rest. */
export const DEFAULT_POLICY = { hardlinkPrefixes: ['usr'], mode: 'reflink' };
const STAGE_CHILD = new URL('./stage-child.mjs', import.meta.url).pathname;

/**
 * Stages `spec` into `sysroot` in a child process (stage-child.mjs: its modules loaded
 * before the timing starts, as a running agent has them) and returns what it printed
 * last (its timings). `o.child`: another build's stage-child.mjs; `o.nodeArgs`: Node's
 * flags (--cpu-prof).
 */
export function stageInChild(sysroot, spec, o = {}) {
  const out = run(process.execPath, [...(o.nodeArgs ?? []), o.child ?? STAGE_CHILD, sysroot, spec, JSON.stringify(o.policy ?? DEFAULT_POLICY)]);
  return JSON.parse(out.trim().split('\n').pop());
}
