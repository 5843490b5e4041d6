/**
 * The operation table is the one declaration of where hooks run and which operations are
 * a transition of the pure model; recovery runs the resume steps it is given, in order.
 */
import { describe, expect, it, afterEach } from 'vitest';
import { makeContext } from '../../src/context.js';
import { HOOK_PHASES } from '../../src/hooks/phases.js';
import { OPERATIONS, RESUME_STEPS, type OperationSpec } from '../../src/operations/table.js';
import { recover, type ResumeStep } from '../../src/store/recover.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

describe('the operation table', () => {
  it('places every hook phase in some operation, and each pre-* phase in exactly one', () => {
    const specs: OperationSpec[] = Object.values(OPERATIONS);
    const used = new Set(specs.flatMap((o) => [o.hooks.pre, o.hooks.post, o.hooks.onFailure && 'on-failure', o.hooks.onRollback && 'on-rollback'].filter((x): x is string => typeof x === 'string')));
    expect([...used].sort()).toEqual([...HOOK_PHASES].sort());
    for (const phase of HOOK_PHASES.filter((p) => p.startsWith('pre-'))) expect(specs.filter((o) => o.hooks.pre === phase)).toHaveLength(1);
  });

  it('plans the one-transition operations purely: the same state and input give the same transition, and the state is not changed', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    await t.sysroot.stage({ version: 1, label: 'two', files: [{ path: '/etc/a', contents: 'a\n' }] });
    const s = t.sysroot.state();
    const before = JSON.stringify(s);
    const once = OPERATIONS.discard.plan(s);
    expect(OPERATIONS.discard.plan(s)).toEqual(once);
    expect(once.drop).toEqual([s.staged]);
    expect(OPERATIONS.pin.plan(s, { id: s.current, pinned: true }).next.deployments.find((d) => d.id === s.current)?.pinned).toBe(true);
    expect(JSON.stringify(s)).toBe(before);
  });
});

describe('recovery runs the resume steps it is given', () => {
  it('in order, after the state is settled, with what each step did reported', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const ctx = makeContext(t.dir, {});
    const seen: string[] = [];
    const step = (name: string): ResumeStep => ({
      operation: name,
      resume: (_c, state, actions) => {
        seen.push(`${name}:${state.current}`);
        actions.push(`resumed ${name}`);
        return state;
      },
    });
    const r = recover(ctx, [step('first'), step('second')]);
    expect(seen).toEqual(['first:0001', 'second:0001']);
    expect(r.actions).toEqual(['resumed first', 'resumed second']);
  });

  it('the writers run the shared-layout upgrade, then undo or complete a live apply, before finalize resumes (its merge must read the running /etc as it was), then the layer import, then the rollback tree after both (a carry finalize completes reads the tree first)', () => {
    expect(RESUME_STEPS.map((s) => s.operation)).toEqual(['shared-directory layout upgrade', 'apply-live', 'finalize', 'layer import', 'live-apply rollback tree']);
  });

  it('takes every resume step from a row of the table (none is declared elsewhere), and a row run inside another names a row', () => {
    const specs: OperationSpec[] = Object.values(OPERATIONS);
    expect(RESUME_STEPS.slice(1)).toEqual(specs.flatMap((o) => o.resume ?? []));
    for (const o of specs) if (o.partOf !== undefined) expect(Object.keys(OPERATIONS)).toContain(o.partOf);
  });
});
