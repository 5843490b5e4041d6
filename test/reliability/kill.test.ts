import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { invariantViolations, protectedTrees, protectedTreeViolations, smallRootTree, smallUpdateSpec } from './invariants.js';

/**
 * SIGKILL a real child process in the middle of stage, finalize, rollback or prune, at a
 * random moment, many times; after each kill, opening the sysroot must recover it and
 * the invariants must hold. STAGEDROOT_KILL_ITERATIONS=N for long runs (default 200).
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const child = path.join(here, 'child/op.mjs');
const ITERATIONS = Number(process.env.STAGEDROOT_KILL_ITERATIONS ?? 200);
const OPS = ['stage', 'finalize', 'rollback', 'prune'] as const;
type Op = (typeof OPS)[number];

interface Outcome {
  killed: boolean;
  ms: number | null;
  stderr: string;
}

/** A child process started ahead of time; `run` gives it its one operation. */
class Spare {
  private p: ChildProcess;
  private out = '';
  private stderr = '';
  private ready: Promise<void>;
  private exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private onOut: () => void = () => {};

  constructor() {
    this.p = spawn(process.execPath, [child], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.p.stdout!.on('data', (d: Buffer) => {
      this.out += d.toString();
      this.onOut();
    });
    this.p.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.p.on('exit', (code, signal) => resolve({ code, signal })));
    this.ready = new Promise((resolve, reject) => {
      this.onOut = () => this.out.includes('ready\n') && resolve();
      void this.exited.then(() => reject(new Error(`the child exited before it was ready: ${this.stderr}`)));
    });
    this.ready.catch(() => {}); // a spare killed unused is no error; run() still sees it
  }

  /** Runs the operation; once it says "go", kills it after `delayMs` unless it is done by then. */
  async run(op: Op, dir: string, spec: string, delayMs: number): Promise<Outcome> {
    await this.ready;
    let timer: NodeJS.Timeout | undefined;
    this.onOut = () => {
      if (timer === undefined && this.out.includes('go\n')) timer = setTimeout(() => this.p.kill('SIGKILL'), delayMs);
      if (this.out.includes('done ')) clearTimeout(timer); // finished first: let it exit
    };
    this.p.stdin!.end(JSON.stringify([op, dir, spec]) + '\n');
    const { code, signal } = await this.exited;
    clearTimeout(timer);
    const done = /done ([\d.]+)/.exec(this.out);
    return { killed: signal === 'SIGKILL' && !done, ms: done ? Number(done[1]) : null, stderr: `${this.stderr}${this.out} (exit ${code ?? signal})` };
  }

  kill(): void {
    this.p.kill('SIGKILL');
  }
}

describe('SIGKILL at a random moment of stage, finalize, rollback, prune', () => {
  let t: TempSysroot;
  const specs: string[] = [];

  beforeAll(async () => {
    if (!fs.existsSync(path.join(here, '../../dist/index.js'))) throw new Error('the child processes run dist/: run `npm run build` first (npm test does)');
    // In memory (/dev/shm) where there is one: a SIGKILL loses nothing the page cache
    // holds, so the filesystem does not change what is tested, and fsync is free.
    const previous = process.env.TMPDIR;
    if (fs.existsSync('/dev/shm')) process.env.TMPDIR = '/dev/shm';
    try {
      t = await tempSysroot({ tree: smallRootTree(), prefix: 'stagedroot-kill-' });
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
    }
    for (const tag of ['a', 'b', 'c']) {
      const f = path.join(t.scratch, `spec-${tag}.json`);
      fs.writeFileSync(f, JSON.stringify(smallUpdateSpec(tag)));
      specs.push(f);
    }
  });
  afterAll(() => t?.cleanup());

  it(`recovers to a consistent state after each of ${ITERATIONS} kills`, { timeout: Math.max(120_000, ITERATIONS * 2_000) }, async () => {
    // Seeded, so that a failure can be replayed: STAGEDROOT_KILL_SEED.
    let seed = Number(process.env.STAGEDROOT_KILL_SEED ?? Date.now() % 1_000_000);
    const rnd = (): number => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      return seed / 2 ** 32;
    };
    const startSeed = seed;
    // How long each operation takes here (kill delays are drawn from 0 to that).
    const typical: Record<Op, number> = { stage: 150, finalize: 40, rollback: 20, prune: 40 };
    const counts = { killed: 0, finished: 0 };
    const byOp: Record<string, number> = {};
    let sys = (await invariantViolations(t.dir)).sysroot;
    // Two children warming up ahead: a Node start is slower than the operation.
    const spares = [new Spare(), new Spare()];
    try {
      for (let i = 0; i < ITERATIONS; i++) {
        const op = OPS[Math.floor(rnd() * OPS.length)]!;
        const spec = specs[Math.floor(rnd() * specs.length)]!;
        // Preconditions, set up without kills: something staged to finalize, a rollback target, something to prune.
        const s = sys.status();
        if (op === 'finalize' && s.staged === null) await sys.stage(spec);
        if (op === 'rollback' && s.rollback === null) {
          await sys.stage(spec);
          await sys.finalize();
          await sys.boot();
          await sys.markGood();
        }
        if (op === 'prune' && s.deployments.length < 3) {
          await sys.stage(spec);
          await sys.finalize();
        }
        const before = protectedTrees(sys);
        const delay = rnd() * typical[op];
        const r = await spares.shift()!.run(op, t.dir, spec, delay);
        spares.push(new Spare()); // starts while this iteration is checked
        // Delays should span the whole operation: learn its length from both outcomes.
        if (r.killed) {
          counts.killed += 1;
          typical[op] *= 1.1;
        } else if (r.ms !== null) {
          counts.finished += 1;
          typical[op] = 0.7 * typical[op] + 0.3 * r.ms;
        } else throw new Error(`${op} failed without being killed (iteration ${i}, seed ${startSeed}): ${r.stderr}`);
        byOp[`${op}${r.killed ? ' killed' : ''}`] = (byOp[`${op}${r.killed ? ' killed' : ''}`] ?? 0) + 1;

        const after = await invariantViolations(t.dir);
        sys = after.sysroot;
        const context = `iteration ${i}, ${op} ${r.killed ? `killed after ${delay.toFixed(1)} ms` : 'finished'}, seed ${startSeed}; recovery: ${JSON.stringify(after.recovery)}`;
        expect(after.violations, context).toEqual([]);
        expect(protectedTreeViolations(sys, before), context).toEqual([]);

        // Now and then a reboot, and keep the number of deployments small.
        if (rnd() < 0.3) {
          const st = sys.status();
          if (st.current !== st.booted) {
            await sys.boot();
            await sys.markGood();
          }
        }
        if (sys.status().deployments.length > 5) await sys.prune({ keep: 2 });
      }
    } finally {
      for (const sp of spares) sp.kill();
    }
    console.log(`kill test: ${ITERATIONS} iterations (seed ${startSeed}): ${counts.killed} killed mid-operation, ${counts.finished} finished first; ${JSON.stringify(byOp)}`);
    // The test means something only if most kills land inside the operation.
    expect(counts.killed).toBeGreaterThan(ITERATIONS * 0.4);
  });
});
