import { describe, expect, it } from 'vitest';
import {
  bootTransition,
  discardTransition,
  effectiveState,
  finalizeFailed,
  finalizeTransition,
  lastGood,
  markBadTransition,
  markGoodTransition,
  nextId,
  protectedIds,
  pruneTransition,
  rollbackTransition,
  stageFailed,
  stageSucceeded,
} from '../../src/state/model.js';
import { baseStateSchema, type BaseState, type DeploymentRecord, type Failure } from '../../src/state/schema.js';

const AT = '2025-01-01T00:00:00.000Z';

function rec(id: string, o: Partial<DeploymentRecord> = {}): DeploymentRecord {
  return { id, label: `l${id}`, createdAt: AT, parent: null, status: 'ready', good: false, triesLeft: null, pinned: false, locked: false, entries: 0, bytes: 0, manifestSha256: null, failure: null, ...o };
}

/** A state, deep-frozen: transitions must be pure and never mutate their input. */
function state(o: Partial<BaseState> & Pick<BaseState, 'deployments' | 'current'>): BaseState {
  const s: BaseState = { version: 1, booted: o.current, staged: null, rollback: null, lastFailure: null, finalizeFailure: null, bootTries: 3, lastId: '0000', ...o };
  baseStateSchema.parse(s);
  return deepFreeze(s);
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

function failure(id: string, phase: Failure['phase'] = 'apply'): Failure {
  return { id, label: `l${id}`, phase, reason: 'broken', at: AT };
}

/** Booted 0001 (good); 0002 staged. */
const stagedOverGood = state({ current: '0001', staged: '0002', deployments: [rec('0001', { good: true }), rec('0002')] });

describe('state model transitions (pure)', () => {
  it('stage: the new deployment is staged, a staged and a failed one are superseded', () => {
    const s = state({
      current: '0001',
      staged: '0002',
      lastFailure: failure('0003'),
      deployments: [rec('0001', { good: true }), rec('0002'), rec('0003', { status: 'failed', failure: failure('0003') })],
    });
    const t = stageSucceeded(s, rec('0004'));
    expect(t.next.staged).toBe('0004');
    expect(t.next.lastFailure).toBeNull();
    expect(t.drop.sort()).toEqual(['0002', '0003']);
    expect(t.next.deployments.map((d) => d.id)).toEqual(['0001', '0004']);
  });

  it('a failed stage is recorded; what was staged stays staged; an older failure is dropped', () => {
    const s = state({ current: '0001', staged: '0002', deployments: [rec('0001', { good: true }), rec('0002'), rec('0003', { status: 'failed' })] });
    const f = failure('0004');
    const t = stageFailed(s, f, rec('0004', { status: 'failed', failure: f }));
    expect(t.next.staged).toBe('0002');
    expect(t.next.lastFailure).toEqual(f);
    expect(t.drop).toEqual(['0003']);
    expect(t.next.deployments.map((d) => `${d.id}:${d.status}`)).toEqual(['0001:ready', '0002:ready', '0004:failed']);
    // Without a tree to keep (a machine fault), only the record of the failure.
    expect(stageFailed(s, f, null).next.deployments.map((d) => d.id)).toEqual(['0001', '0002']);
  });

  it('finalize: staged becomes current with boot tries; the good old current becomes rollback', () => {
    const t = finalizeTransition(stagedOverGood);
    expect(t.next).toMatchObject({ current: '0002', staged: null, rollback: '0001', booted: '0001' });
    expect(t.next.deployments.find((d) => d.id === '0002')!.triesLeft).toBe(3);
    expect(t.drop).toEqual([]);
    expect(() => finalizeTransition(state({ current: '0001', deployments: [rec('0001', { good: true })] }))).toThrow(expect.objectContaining({ code: 'NOTHING_STAGED' }));
  });

  it('finalize over a finalized but never booted deployment supersedes it', () => {
    const s = state({ current: '0002', booted: '0001', rollback: '0001', staged: '0003', deployments: [rec('0001', { good: true }), rec('0002', { triesLeft: 3 }), rec('0003')] });
    const t = finalizeTransition(s);
    expect(t.next).toMatchObject({ current: '0003', rollback: '0001' });
    expect(t.drop).toEqual(['0002']);
    // ...unless it is pinned.
    const pinned = state({ ...s, deployments: [rec('0001', { good: true }), rec('0002', { triesLeft: 3, pinned: true }), rec('0003')] });
    expect(finalizeTransition(pinned).drop).toEqual([]);
  });

  it('a finalize failure is recorded, the staged deployment failed and unstaged; boot reports it once', () => {
    const f = failure('0002', 'finalize');
    const t = finalizeFailed(stagedOverGood, f);
    expect(t.next).toMatchObject({ current: '0001', staged: null, lastFailure: f, finalizeFailure: { ...f, reported: false } });
    expect(t.next.deployments.find((d) => d.id === '0002')!.status).toBe('failed');
    const b1 = bootTransition(t.next, AT);
    expect(b1.finalizeFailure).toEqual({ ...f, reported: false });
    expect(bootTransition(b1.next, AT).finalizeFailure).toBeNull();
  });

  it('boot of a good deployment uses no tries', () => {
    const s = state({ current: '0001', booted: null, deployments: [rec('0001', { good: true })] });
    const b = bootTransition(s, AT);
    expect(b.next.booted).toBe('0001');
    expect(b.event).toEqual({ kind: 'booted', id: '0001', triesLeft: null });
  });

  it('three boots without mark-good: the fourth falls back to the last good deployment', () => {
    let s = finalizeTransition(stagedOverGood).next;
    for (const left of [2, 1, 0]) {
      const b = bootTransition(s, AT);
      expect(b.event).toEqual({ kind: 'booted', id: '0002', triesLeft: left });
      expect(b.next).toMatchObject({ booted: '0002', current: '0002' });
      s = b.next;
    }
    const fourth = bootTransition(s, AT);
    expect(fourth.event).toMatchObject({ kind: 'fell-back', from: '0002', to: '0001' });
    expect(fourth.next).toMatchObject({ current: '0001', booted: '0001', rollback: null });
    expect(fourth.next.lastFailure).toMatchObject({ id: '0002', phase: 'boot' });
    expect(fourth.next.lastFailure!.reason).toContain('3 boot tries');
    expect(fourth.next.deployments.find((d) => d.id === '0002')).toMatchObject({ status: 'failed', good: false, triesLeft: 0 });
    expect(fourth.drop).toEqual([]); // kept for diagnosis
  });

  it('falls back to the newest good deployment when the rollback is not good', () => {
    const s = state({ current: '0003', booted: '0003', rollback: null, deployments: [rec('0001', { good: true }), rec('0002', { good: true }), rec('0003', { triesLeft: 0 })] });
    const b = bootTransition(s, AT);
    expect(b.event).toMatchObject({ kind: 'fell-back', to: '0002' });
    expect(b.next.rollback).toBe('0001');
  });

  it('with nothing good to fall back to, boots the exhausted deployment anyway', () => {
    const s = state({ current: '0001', deployments: [rec('0001', { triesLeft: 0 })] });
    expect(bootTransition(s, AT).event).toEqual({ kind: 'booted', id: '0001', triesLeft: 0 });
  });

  it('mark-good makes the booted deployment good and clears its tries', () => {
    const s = bootTransition(finalizeTransition(stagedOverGood).next, AT).next;
    const g = markGoodTransition(s).next;
    expect(g.deployments.find((d) => d.id === '0002')).toMatchObject({ good: true, triesLeft: null, status: 'ready' });
    expect(() => markGoodTransition(state({ current: '0001', booted: null, deployments: [rec('0001')] }))).toThrow(expect.objectContaining({ code: 'INVALID_TRANSITION' }));
  });

  it('mark-bad: the booted deployment fails, current goes back to the last good one', () => {
    const s = bootTransition(finalizeTransition(stagedOverGood).next, AT).next;
    const f = failure('0002', 'health');
    const t = markBadTransition(s, f);
    expect(t.next).toMatchObject({ current: '0001', booted: '0002', rollback: null, lastFailure: f });
    expect(t.next.deployments.find((d) => d.id === '0002')).toMatchObject({ status: 'failed', good: false });
    const alone = state({ current: '0001', deployments: [rec('0001', { good: true })] });
    expect(() => markBadTransition(alone, failure('0001', 'health'))).toThrow(expect.objectContaining({ code: 'NO_ROLLBACK' }));
  });

  it('rollback swaps current and rollback', () => {
    const s = state({ current: '0002', booted: '0002', rollback: '0001', deployments: [rec('0001', { good: true }), rec('0002', { good: true })] });
    const t = rollbackTransition(s);
    expect(t.next).toMatchObject({ current: '0001', rollback: '0002', booted: '0002' });
    expect(() => rollbackTransition(state({ current: '0001', deployments: [rec('0001', { good: true })] }))).toThrow(expect.objectContaining({ code: 'NO_ROLLBACK' }));
  });

  it('rollback refuses while something is staged, unless told to discard it', () => {
    const s = state({ current: '0002', booted: '0002', rollback: '0001', staged: '0003', deployments: [rec('0001', { good: true }), rec('0002', { good: true }), rec('0003')] });
    expect(() => rollbackTransition(s)).toThrow(expect.objectContaining({ code: 'INVALID_TRANSITION', value: '0003' }));
    expect(() => rollbackTransition(s)).toThrow(/0003 is staged/);
    const t = rollbackTransition(s, { discardStaged: true });
    expect(t.next).toMatchObject({ current: '0001', staged: null, rollback: '0002' });
    expect(t.drop).toEqual(['0003']);
  });

  it('discard drops the staged deployment', () => {
    const t = discardTransition(stagedOverGood);
    expect(t.next.staged).toBeNull();
    expect(t.drop).toEqual(['0002']);
    expect(() => discardTransition(t.next)).toThrow(expect.objectContaining({ code: 'NOTHING_STAGED' }));
  });

  it('prune keeps the newest N and every booted, current, staged, rollback, pinned or last-failed one', () => {
    const s = state({
      current: '0006',
      booted: '0005',
      rollback: '0004',
      staged: '0009',
      lastFailure: failure('0008'),
      deployments: ['0001', '0002', '0003', '0004', '0005', '0006', '0007', '0008', '0009'].map((id) =>
        rec(id, { good: id < '0007', pinned: id === '0002', status: id === '0008' ? 'failed' : 'ready' }),
      ),
    });
    expect([...protectedIds(s)].sort()).toEqual(['0002', '0004', '0005', '0006', '0008', '0009']);
    const t = pruneTransition(s, 1);
    expect(t.drop.sort()).toEqual(['0001', '0003', '0007']);
    expect(pruneTransition(s, 0).drop.sort()).toEqual(['0001', '0003', '0007']);
    expect(pruneTransition(s, 3).drop.sort()).toEqual(['0001', '0003']);
    expect(pruneTransition(s, 100).drop).toEqual([]);
  });

  it('a merge report goes with the deployment it names (its kept copies are removed with it); others stay', () => {
    const merge = (id: string): NonNullable<BaseState['lastMerge']> => ({ id, at: AT, carried: 1, conflicts: [{ path: 'etc/motd', kept: `kept/${id}/etc/motd` }] });
    const deps = ['0001', '0002', '0003'].map((id) => rec(id, { good: true }));
    const dropped = state({ current: '0003', rollback: '0002', deployments: deps, lastMerge: merge('0001') });
    expect(pruneTransition(dropped, 0)).toMatchObject({ drop: ['0001'], next: { lastMerge: null } });
    const listed = state({ current: '0003', rollback: '0002', deployments: deps, lastMerge: merge('0003') });
    expect(pruneTransition(listed, 0).next.lastMerge).toEqual(merge('0003'));
  });

  it('the symlink decides a pointer swap in progress', () => {
    const before = state({ current: '0001', staged: '0002', deployments: [rec('0001', { good: true }), rec('0002')] });
    const next = finalizeTransition(before).next;
    const withIntent = { ...before, intent: { op: 'finalize', next } };
    expect(effectiveState(withIntent, '0001')).toEqual(before);
    expect(effectiveState(withIntent, '0002')).toEqual(next);
    expect(effectiveState({ ...before, intent: null }, '0002')).toEqual(before);
  });

  it('ids are four or more digits, one past the highest known', () => {
    expect(nextId([])).toBe('0001');
    expect(nextId(['0001', '0009', 'junk', '0003'])).toBe('0010');
    expect(nextId(['9999'])).toBe('10000');
    expect(lastGood(stagedOverGood, [])).toBe('0001');
    expect(lastGood(stagedOverGood, ['0001'])).toBeNull();
  });
});
