import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { invariantViolations, smallRootTree, smallUpdateSpec } from './invariants.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const worker = path.join(here, 'child/worker.mjs');
const run = promisify(execFile);
const PROCESSES = 8;
const OPS_EACH = Number(process.env.STAGEDROOT_CONCURRENCY_OPS ?? 25);

/** Errors a writer may meet in a random sequence of operations; anything else is a bug. */
const LIFECYCLE_REFUSALS = new Set(['NOTHING_STAGED', 'NO_ROLLBACK', 'INVALID_TRANSITION']);

interface Result {
  op: string;
  ok: boolean;
  code?: string | null;
  message?: string;
}

describe('8 processes running random lifecycle operations on one sysroot', () => {
  let t: TempSysroot;
  let spec: string;

  beforeAll(async () => {
    if (!fs.existsSync(path.join(here, '../../dist/index.js'))) throw new Error('the child processes run dist/: run `npm run build` first (npm test does)');
    t = await tempSysroot({ tree: smallRootTree(), prefix: 'stagedroot-concurrency-' });
    spec = path.join(t.scratch, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify(smallUpdateSpec('c')));
  });
  afterAll(() => t?.cleanup());

  it('never corrupts the sysroot, and every refused writer gets BUSY', { timeout: 240_000 }, async () => {
    const seed = Number(process.env.STAGEDROOT_CONCURRENCY_SEED ?? Date.now() % 100_000);
    const outputs = await Promise.all(
      Array.from({ length: PROCESSES }, (_, i) => run(process.execPath, [worker, t.dir, spec, String(seed + i), String(OPS_EACH)], { maxBuffer: 16 << 20 })),
    );
    const results: Result[] = outputs.flatMap((o) => o.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Result));
    expect(results).toHaveLength(PROCESSES * OPS_EACH);

    const busy = results.filter((r) => r.code === 'BUSY');
    const unexpected = results.filter((r) => !r.ok && r.code !== 'BUSY' && !LIFECYCLE_REFUSALS.has(r.code ?? ''));
    const tally: Record<string, number> = {};
    for (const r of results) tally[`${r.op} ${r.ok ? 'ok' : r.code}`] = (tally[`${r.op} ${r.ok ? 'ok' : r.code}`] ?? 0) + 1;
    console.log(`concurrency (seed ${seed}): ${JSON.stringify(tally)}`);

    expect(unexpected, `seed ${seed}`).toEqual([]);
    // The busy error names the holder and how to wait.
    for (const b of busy) expect(b.message).toMatch(/is busy: process \d+ holds the lock for "[\w-]+"/);
    // Contention really happened, and writers got through.
    expect(busy.length).toBeGreaterThan(0);
    expect(results.filter((r) => r.ok && r.op === 'stage').length).toBeGreaterThan(0);

    const after = await invariantViolations(t.dir);
    expect(after.violations, `seed ${seed}; recovery: ${JSON.stringify(after.recovery)}`).toEqual([]);
  });
});
