import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeContext } from '../../src/context.js';
import { StagedrootError } from '../../src/errors.js';
import { checkState, stateViolations, transitionViolations, verifyTransition } from '../../src/state/invariants.js';
import {
  bootTransition,
  discardTransition,
  finalizeFailed,
  finalizeTransition,
  markBadTransition,
  markGoodTransition,
  newRecord,
  nextId,
  pruneTransition,
  rollbackTransition,
  setLocked,
  setPinned,
  stageFailed,
  stageSucceeded,
  type Transition,
} from '../../src/state/model.js';
import type { BaseState, DeploymentRecord, Failure } from '../../src/state/schema.js';
import { applyTransition } from '../../src/store/apply-transition.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { prng } from '../helpers/random.js';

const AT = '2025-01-01T00:00:00.000Z';

function rec(id: string, o: Partial<DeploymentRecord> = {}): DeploymentRecord {
  return { id, label: `l${id}`, createdAt: AT, parent: null, status: 'ready', good: false, triesLeft: null, pinned: false, locked: false, entries: 0, bytes: 0, manifestSha256: null, failure: null, ...o };
}

function failure(id: string, phase: Failure['phase'] = 'apply'): Failure {
  return { id, label: `l${id}`, phase, reason: 'broken', at: AT };
}

/** Booted and current 0001 (good), 0002 staged, 0003 a good rollback. */
const GOOD: BaseState = {
  version: 1,
  current: '0001',
  booted: '0001',
  staged: '0002',
  rollback: '0003',
  lastFailure: null,
  finalizeFailure: null,
  bootTries: 3,
  lastId: '0003',
  deployments: [rec('0001', { good: true }), rec('0002'), rec('0003', { good: true })],
};

const broken = (s: BaseState): string[] => stateViolations(s).map((v) => v.invariant);

describe('state invariants (pure)', () => {
  it('a consistent state breaks none', () => {
    expect(stateViolations(GOOD)).toEqual([]);
  });

  it.each<[string, Partial<BaseState> | ((s: BaseState) => BaseState)]>([
    ['ids-unique', (s) => ({ ...s, deployments: [...s.deployments, rec('0002')] })],
    ['current-exists', { current: '0009' }],
    ['current-ready', (s) => ({ ...s, deployments: s.deployments.map((d) => (d.id === '0001' ? { ...d, good: false, status: 'failed', failure: failure('0001') } : d)) })],
    ['booted-exists', { booted: '0009' }],
    ['staged-exists', { staged: '0009' }],
    ['staged-ready', (s) => ({ ...s, deployments: s.deployments.map((d) => (d.id === '0002' ? { ...d, status: 'failed', failure: failure('0002') } : d)) })],
    ['staged-not-current', { staged: '0001', booted: null }],
    ['rollback-exists', { rollback: '0009' }],
    ['rollback-good', (s) => ({ ...s, deployments: s.deployments.map((d) => (d.id === '0003' ? { ...d, good: false } : d)) })],
    ['rollback-not-current', { rollback: '0001' }],
    ['failure-recorded', (s) => ({ ...s, deployments: s.deployments.map((d) => (d.id === '0002' ? { ...d, failure: failure('0002') } : d)) })],
    ['good-is-ready', (s) => ({ ...s, deployments: [...s.deployments, rec('0004', { good: true, status: 'failed', failure: failure('0004') })] })],
  ])('names a broken %s', (invariant, change) => {
    const s = typeof change === 'function' ? change(GOOD) : { ...GOOD, ...change };
    expect(broken(s)).toContain(invariant);
  });

  it('checks the state after a swap in progress too', () => {
    const err = (() => {
      try {
        checkState({ ...GOOD, intent: { op: 'rollback', next: { ...GOOD, current: '0003', rollback: '0003' } } });
      } catch (e) {
        return e as StagedrootError;
      }
      return null;
    })();
    expect(err).toMatchObject({ code: 'INVARIANT_VIOLATED' });
    expect(err!.message).toMatch(/^Refusing to write the state after the rollback: invariant rollback-not-current broken: deployment 0003 is both rollback and current\./);
  });

  it('a transition may not drop a deployment it keeps', () => {
    expect(transitionViolations(GOOD, { next: GOOD, drop: ['0002'] }).map((v) => v.invariant)).toEqual(['dropped-not-kept']);
  });

  it('every transition of a random lifecycle keeps every invariant (10 seeds × 200 steps)', () => {
    for (let seed = 1; seed <= 10; seed++) {
      const rnd = prng(seed);
      let s: BaseState = { ...GOOD, staged: null, rollback: null, lastId: '0001', deployments: [rec('0001', { good: true })] };
      const ops: Array<(s: BaseState) => Transition> = [
        (x) => stageSucceeded(x, newRecord({ id: nextId([x.lastId]), label: 'u', parent: x.current, at: AT, source: 's' })),
        (x) => stageFailed(x, failure(nextId([x.lastId])), rnd() < 0.5 ? newRecord({ id: nextId([x.lastId]), label: 'u', parent: x.current, at: AT, source: 's', failure: failure(nextId([x.lastId])) }) : null),
        (x) => finalizeTransition(x),
        (x) => finalizeFailed(x, failure(x.staged ?? x.current, 'finalize')),
        (x) => bootTransition(x, AT),
        (x) => markGoodTransition(x),
        (x) => markBadTransition(x, failure(x.booted ?? x.current, 'health')),
        (x) => rollbackTransition(x, { discardStaged: rnd() < 0.5 }),
        (x) => discardTransition(x),
        (x) => pruneTransition(x, Math.floor(rnd() * 3)),
        (x) => setPinned(x, x.deployments[Math.floor(rnd() * x.deployments.length)]!.id, rnd() < 0.5),
        (x) => setLocked(x, rnd() < 0.5),
      ];
      let applied = 0;
      for (let step = 0; step < 200; step++) {
        const op = ops[Math.floor(rnd() * ops.length)]!;
        let t: Transition;
        try {
          t = op(s);
        } catch (err) {
          if (err instanceof StagedrootError) continue; // not allowed now (NOTHING_STAGED, NO_ROLLBACK, ...)
          throw err;
        }
        expect(transitionViolations(s, t), `seed ${seed} step ${step}`).toEqual([]);
        s = t.next;
        applied++;
      }
      expect(applied).toBeGreaterThan(50);
    }
  });
});

describe('the transition writer', () => {
  let t: TempSysroot;
  afterEach(() => t?.cleanup());

  const snapshot = (dir: string): Record<string, string> =>
    Object.fromEntries(
      fs.readdirSync(dir).sort().map((n) => {
        const p = path.join(dir, n);
        const st = fs.lstatSync(p);
        return [n, st.isSymbolicLink() ? `-> ${fs.readlinkSync(p)}` : st.isFile() ? fs.readFileSync(p, 'utf8') : `dir ${fs.readdirSync(p).sort().join(',')}`];
      }),
    );

  it('refuses a corrupt transition before anything is written (INVARIANT_VIOLATED, naming it)', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'new\n' }] });
    const from = t.sysroot.state();
    const before = snapshot(t.dir);
    const ctx = makeContext(t.dir);

    // A pointer swap to a deployment that is not recorded: would leave `current` dangling.
    const swap = { next: { ...from, current: '0009', staged: null }, drop: [] };
    expect(() => applyTransition(ctx, from, swap, 'finalize')).toThrow(expect.objectContaining({ code: 'INVARIANT_VIOLATED', message: expect.stringMatching(/invariant current-exists broken: current names deployment 0009/) }));
    // A write without a swap: the staged deployment made current's rollback while not good.
    const flip = { next: { ...from, rollback: from.staged }, drop: [] };
    expect(() => applyTransition(ctx, from, flip, 'pin')).toThrow(expect.objectContaining({ code: 'INVARIANT_VIOLATED' }));
    // Dropping a deployment still recorded would remove the tree of a live record.
    expect(() => verifyTransition(from, { next: from, drop: [from.staged!] }, 'prune')).toThrow(/dropped-not-kept/);
    expect(() => applyTransition(ctx, from, { next: from, drop: [from.staged!] }, 'prune')).toThrow(expect.objectContaining({ code: 'INVARIANT_VIOLATED' }));

    expect(snapshot(t.dir)).toEqual(before);
    expect(t.sysroot.state()).toEqual(from);
  });
});
