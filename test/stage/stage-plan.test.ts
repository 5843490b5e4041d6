/**
 * The stage's plan pieces its dry run shares (stage-plan.ts): the copy policy for a change
 * set and the free-space estimate from it. A command run in the new tree (`stage --run`)
 * may write any file in place, so nothing is hardlinked: its estimate counts usr/ too, in
 * the stage and in its dry run alike.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangeSet } from '../../src/changeset.js';
import { makeContext } from '../../src/context.js';
import { copyPolicyFor, DEFAULT_COPY_POLICY, spaceEstimate } from '../../src/stage/stage-plan.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

describe('the stage plan shared with the dry run', () => {
  it('links usr/ unless a command runs in the tree, and the estimate follows', async () => {
    t = await tempSysroot({ tree: { 'usr/lib/big': 'x'.repeat(200_000), 'etc/small': 'y'.repeat(1_000) } });
    const ctx = makeContext(t.dir, {});
    const base = t.sysroot.state().deployments[0]!;
    const plain: ChangeSet = { description: 'files', ops: [] };
    const run: ChangeSet = { ...plain, runInTree: { command: 'true', timeoutMs: 1000 } };
    expect(copyPolicyFor(DEFAULT_COPY_POLICY, plain).hardlinkPrefixes).toEqual(['usr']);
    expect(copyPolicyFor(DEFAULT_COPY_POLICY, run).hardlinkPrefixes).toEqual([]);
    const linked = await spaceEstimate(ctx.layout, ctx.storage, base, copyPolicyFor(DEFAULT_COPY_POLICY, plain), plain);
    const copied = await spaceEstimate(ctx.layout, ctx.storage, base, copyPolicyFor(DEFAULT_COPY_POLICY, run), run);
    expect(copied.copyBytes - linked.copyBytes).toBeGreaterThanOrEqual(200_000);
  });
});
