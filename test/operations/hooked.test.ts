/**
 * runHooked: an operation's hooks run where its row in the operation table says, and only
 * there; the operation says only what each point is about.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../src/context.js';
import { preHooksOf, runHooked, type HookPoints } from '../../src/operations/hooked.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const PHASES = ['pre-stage', 'post-stage', 'pre-finalize', 'post-finalize', 'post-boot', 'on-failure', 'on-rollback'];

/** A sysroot with a hook in every phase that logs its phase and deployment id. */
async function withLoggers(): Promise<{ ctx: ReturnType<typeof makeContext>; log: () => string[] }> {
  t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
  const file = path.join(t.scratch, 'hooks.log');
  for (const phase of PHASES) {
    fs.mkdirSync(path.join(t.dir, 'hooks', phase), { recursive: true });
    fs.writeFileSync(path.join(t.dir, 'hooks', phase, '10-log'), `#!/bin/sh\necho "$STAGEDROOT_PHASE $STAGEDROOT_ID" >> ${file}\n`, { mode: 0o755 });
  }
  return { ctx: makeContext(t.dir, {}), log: () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n') : []) };
}

const every: HookPoints<string> = {
  pre: { about: { id: 'p' }, stop: { code: 'HOOK_FAILED', message: (w) => `stopped by ${w}` } },
  failed: () => ({ id: 'f' }),
  rolledBack: (r) => ({ id: r }),
  done: (r) => ({ id: r }),
};

describe('runHooked', () => {
  it("runs a row's points in order around apply: pre, apply, on-rollback, post (finalize: pre and post; boot: on-rollback and post)", async () => {
    const { ctx, log } = await withLoggers();
    const order: string[] = [];
    const r = await runHooked(ctx, 'finalize', every, {}, async () => {
      order.push(...log());
      return 'x';
    });
    expect(order).toEqual(['pre-finalize p']);
    expect(r.result).toBe('x');
    expect(r.post.map((h) => h.phase)).toEqual(['post-finalize']);
    await runHooked(ctx, 'boot', every, {}, async () => 'b');
    expect(log()).toEqual(['pre-finalize p', 'post-finalize x', 'on-rollback b', 'post-boot b']);
  });

  it('runs nothing for a point the row lacks, whatever the operation says (discard has no hooks; boot no on-failure)', async () => {
    const { ctx, log } = await withLoggers();
    await runHooked(ctx, 'discard', every, {}, async () => 'd');
    await expect(runHooked(ctx, 'boot', every, {}, () => Promise.reject(new Error('no')))).rejects.toThrow('no');
    expect(log()).toEqual([]);
  });

  it('on a failure runs on-failure (when the operation says it recorded one) and throws the error; a null point runs nothing', async () => {
    const { ctx, log } = await withLoggers();
    // stage runs its pre hooks inside its own plan (preHooksOf): it gives no pre point here.
    await expect(runHooked(ctx, 'stage', { ...every, pre: null }, {}, () => Promise.reject(new Error('bad')))).rejects.toThrow('bad');
    expect(log()).toEqual(['on-failure f']);
    await expect(runHooked(ctx, 'stage', { failed: () => null, done: () => null }, {}, () => Promise.reject(new Error('bad option')))).rejects.toThrow('bad option');
    await runHooked(ctx, 'stage', { done: () => null }, {}, async () => 'nothing done');
    expect(log()).toEqual(['on-failure f']);
  });

  it("preHooksOf runs the row's pre phase for an operation that runs it itself, and is null for a row without one", async () => {
    const { ctx, log } = await withLoggers();
    expect((await preHooksOf(ctx, 'stage', {})!({ id: 's' })).map((h) => h.phase)).toEqual(['pre-stage']);
    expect(preHooksOf(ctx, 'boot', {})).toBeNull();
    expect(log()).toEqual(['pre-stage s']);
  });

  it('a failing pre hook stops the operation before apply, with the stop the operation gave', async () => {
    const { ctx } = await withLoggers();
    fs.writeFileSync(path.join(t!.dir, 'hooks', 'pre-finalize', '20-no'), '#!/bin/sh\nexit 3\n', { mode: 0o755 });
    let applied = false;
    await expect(runHooked(ctx, 'finalize', every, {}, async () => ((applied = true), 'applied'))).rejects.toMatchObject({ code: 'HOOK_FAILED', message: expect.stringMatching(/^stopped by /) });
    expect(applied).toBe(false);
  });
});
