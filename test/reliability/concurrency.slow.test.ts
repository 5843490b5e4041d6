/**
 * Concurrency (docs/invariants.md invariant 5): 8 processes run random lifecycle operations
 * (stage, finalize, boot, mark-good, rollback, discard, prune, status) against one
 * sysroot, while CLI processes read `status --json` and try writers beside them. One
 * writer at a time: every refused writer gets BUSY (CLI exit 4), and nothing else
 * unexpected; readers never block and always parse a whole state; at the end the sysroot
 * is consistent and the lifecycle goes on.
 *
 * Two of the 8 are writers that wait for the lock (`waitSeconds`): they are never refused.
 *
 * STAGEDROOT_CONCURRENCY_OPS=N operations per process (default 24);
 * STAGEDROOT_CONCURRENCY_SEED=S replays a run's choice of operations.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { buildTree, reboot } from '../../src/testing/index.js';
import { CLI } from '../helpers/cli.js';
import { bundledCrashChild, requireDist, scratchDir, startSequence, type SequenceChild } from '../helpers/crash.js';
import { expectConsistent } from '../helpers/invariants.js';
import { prng, seedFrom } from '../helpers/random.js';
import { BASE_TREE } from '../helpers/trees.js';

const PROCESSES = 8;
const OPS_PER_PROCESS = Number(process.env.STAGEDROOT_CONCURRENCY_OPS ?? 24);
if (!Number.isInteger(OPS_PER_PROCESS) || OPS_PER_PROCESS < 1) throw new Error(`STAGEDROOT_CONCURRENCY_OPS must be a positive integer, got ${process.env.STAGEDROOT_CONCURRENCY_OPS}`);
/** Each process pauses up to this long before each operation, so that the run lasts a few seconds. */
const PAUSE_MS = 200;
/** These processes wait for the lock (`waitSeconds`) instead of failing at once: never BUSY. */
const WAITERS = new Set([6, 7]);
const SEED = seedFrom('STAGEDROOT_CONCURRENCY_SEED');
const OPS = ['stage-next', 'stage-next', 'finalize', 'boot', 'markGood', 'rollback-discard', 'discard', 'prune-2', 'status', 'status'];
const WRITER_REFUSALS = new Set(['NOTHING_STAGED', 'NO_ROLLBACK', 'INVALID_TRANSITION']);

interface CliRun {
  args: string[];
  code: number | null;
  out: string;
  err: string;
}

function runCli(args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (code) => resolve({ args, code, out, err }));
  });
}

function bump(m: Map<string, number>, k: string): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}

describe('concurrency: 8 processes on one sysroot', () => {
  let scratch: string | undefined;
  const children: SequenceChild[] = [];

  afterAll(() => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it(`${PROCESSES} processes × ${OPS_PER_PROCESS} random operations: only BUSY refusals, readers always parse, no corruption`, async () => {
    requireDist();
    scratch = scratchDir('stagedroot-concurrency-');
    const dir = path.join(scratch, 'sysroot');
    await Sysroot.init(dir, { fromDirectory: buildTree(path.join(scratch, 'tree'), BASE_TREE) });
    const script = await bundledCrashChild(scratch);
    const rng = prng(SEED);
    const started = performance.now();

    // All loaded first, then started together, so that their operations overlap.
    children.push(...(await Promise.all(Array.from({ length: PROCESSES }, () => startSequence(script)))));
    const plans = children.map(() => Array.from({ length: OPS_PER_PROCESS }, () => OPS[Math.floor(rng() * OPS.length)]!));
    children.forEach((c, i) => c.go(dir, plans[i]!, { pauseMs: PAUSE_MS, waitSeconds: WAITERS.has(i) ? 30 : 0 }));
    let running = true;
    const exits = Promise.all(children.map((c) => c.exit)).finally(() => (running = false));

    // Beside them, CLI processes: a reader and a writer, over and over, until the 8 are done.
    const cliRuns: CliRun[] = [];
    const cliLane = async (verbs: string[][]): Promise<void> => {
      for (let i = 0; running; i++) cliRuns.push(await runCli([...verbs[i % verbs.length]!, '--sysroot', dir, '--json']));
    };
    await Promise.all([exits, cliLane([['status']]), cliLane([['finalize'], ['prune', '--keep', '2'], ['discard']])]);

    const results = new Map<string, number>();
    const n = { writes: 0, busy: 0, refused: 0, reads: 0, waited: 0 };
    for (const [i, c] of children.entries()) {
      const exit = await c.exit;
      const where = `seed ${SEED}, process ${i} (ops ${plans[i]!.join(' ')}; output: ${c.lines.join(' | ')}; stderr: ${exit.stderr})`;
      expect(exit.code, where).toBe(0); // any error other than the allowed refusals exits 1
      expect(c.lines.at(-1), where).toBe('done');
      for (const l of c.lines.filter((x) => x.startsWith('end '))) {
        const [, op, , result] = l.split(' ') as [string, string, string, string];
        if (op === 'status' || op === 'open') expect(result, `${where}: a reader never waits for or is refused by a writer`).toBe('ok');
        else expect(['ok', ...(WAITERS.has(i) ? [] : ['BUSY']), ...WRITER_REFUSALS], where).toContain(result);
        if (op === 'open') continue;
        if (op === 'status') n.reads += 1;
        else if (result === 'BUSY') n.busy += 1;
        else if (result !== 'ok') n.refused += 1;
        else {
          n.writes += 1;
          if (WAITERS.has(i)) n.waited += 1;
        }
        bump(results, `${op} ${result}`);
      }
    }

    const cliCodes = new Map<string, number>();
    for (const r of cliRuns) {
      const where = `stagedroot ${r.args.join(' ')} → exit ${r.code}: ${r.err}${r.out}`;
      bump(cliCodes, `${r.args[0]} exit ${r.code}`);
      if (r.args[0] === 'status') {
        expect(r.code, where).toBe(0);
        const st = JSON.parse(r.out) as { current: string; deployments: { id: string; current: boolean }[] };
        expect(st.deployments.filter((d) => d.current).map((d) => d.id), where).toEqual([st.current]);
      } else {
        // discard with nothing staged is NOTHING_STAGED (exit 1); otherwise done (0) or busy (4).
        expect(r.args[0] === 'discard' ? [0, 1, 4] : [0, 4], where).toContain(r.code);
        if (r.code === 4) expect(JSON.parse(r.out), where).toMatchObject({ ok: false, exitCode: 4, error: { code: 'BUSY' } });
        if (r.code === 1) expect(JSON.parse(r.out), where).toMatchObject({ ok: false, error: { code: 'NOTHING_STAGED' } });
      }
    }

    console.log(
      `concurrency (seed ${SEED}): ${PROCESSES} processes × ${OPS_PER_PROCESS} operations in ${((performance.now() - started) / 1000).toFixed(1)} s: ` +
        `writers: ${n.writes} succeeded (${n.waited} of them by the ${WAITERS.size} that wait for the lock), ${n.busy} refused with BUSY, ${n.refused} refused by the lifecycle (nothing staged, no rollback); readers: ${n.reads} status, all parsed; by operation: ${[...results].sort().map(([k, v]) => `${k} ${v}`).join(', ')}; ` +
        `CLI beside them: ${[...cliCodes].sort().map(([k, v]) => `${k} ×${v}`).join(', ')}`,
    );
    // The run did contend: writers were refused, and writers got through.
    expect(n.busy).toBeGreaterThan(0);
    expect(n.waited).toBeGreaterThan(0);
    expect([...results].filter(([k]) => /^(stage-next|finalize) ok$/.test(k)).length).toBe(2);
    expect(cliRuns.filter((r) => r.args[0] === 'status').length).toBeGreaterThan(0);

    // No corruption: recovered and consistent, and the lifecycle goes on.
    const s = await Sysroot.open(dir);
    expectConsistent(s, dir, `after the concurrent run (seed ${SEED})`);
    const staged = await s.stage({ label: 'after-concurrency', files: [{ path: '/etc/after', contents: 'ok\n' }] });
    await reboot(s);
    expect(s.status().booted).toBe(staged.id);
    expectConsistent(s, dir, 'after a stage and reboot that followed the concurrent run');
  }, 180_000);
});
