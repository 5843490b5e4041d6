import { StagedrootError } from '../errors.js';
import type { Transition } from './model.js';
import type { BaseState, DeploymentRecord, State } from './schema.js';

/**
 * The cross-record invariants of a state, checked before every state write (the store
 * calls checkState; the transition writer calls verifyTransition first), as bootc checks
 * a transition before it is written. A state that breaks one is never written: a bug in
 * a transition stops loudly (INVARIANT_VIOLATED, naming the invariant) instead of
 * leaving a sysroot that boots the wrong tree or none.
 */
export interface Violation {
  /** A stable name for the invariant ("current-ready"). */
  invariant: string;
  message: string;
}

/** Every invariant a state breaks (empty when it is consistent). Pure. */
export function stateViolations(s: BaseState): Violation[] {
  const out: Violation[] = [];
  const broken = (invariant: string, message: string): void => void out.push({ invariant, message });
  const byId = new Map<string, DeploymentRecord>();
  for (const d of s.deployments) {
    if (byId.has(d.id)) broken('ids-unique', `deployment ${d.id} is recorded twice`);
    byId.set(d.id, d);
  }
  for (const d of s.deployments) {
    if ((d.status === 'failed') !== (d.failure !== null)) {
      broken('failure-recorded', `deployment ${d.id} is ${d.status} ${d.failure === null ? 'without' : 'with'} a failure record`);
    }
    if (d.good && d.status !== 'ready') broken('good-is-ready', `deployment ${d.id} is marked good but ${d.status}`);
  }

  const current = byId.get(s.current);
  if (!current) broken('current-exists', `current names deployment ${s.current}, which is not recorded`);
  else if (current.status !== 'ready') broken('current-ready', `current deployment ${s.current} is ${current.status}`);

  if (s.booted !== null && !byId.has(s.booted)) broken('booted-exists', `booted names deployment ${s.booted}, which is not recorded`);

  if (s.staged !== null) {
    const staged = byId.get(s.staged);
    if (!staged) broken('staged-exists', `staged names deployment ${s.staged}, which is not recorded`);
    else if (staged.status !== 'ready') broken('staged-ready', `staged deployment ${s.staged} is ${staged.status}`);
    if (s.staged === s.current) broken('staged-not-current', `deployment ${s.staged} is both staged and current`);
    if (s.staged === s.booted) broken('staged-not-booted', `deployment ${s.staged} is both staged and booted`);
    if (s.staged === s.rollback) broken('staged-not-rollback', `deployment ${s.staged} is both staged and rollback`);
  }

  if (s.rollback !== null) {
    const rollback = byId.get(s.rollback);
    if (!rollback) broken('rollback-exists', `rollback names deployment ${s.rollback}, which is not recorded`);
    else if (!rollback.good || rollback.status !== 'ready') broken('rollback-good', `rollback deployment ${s.rollback} is ${rollback.status}${rollback.good ? '' : ' and not marked good'}`);
    if (s.rollback === s.current) broken('rollback-not-current', `deployment ${s.rollback} is both rollback and current`);
  }
  return out;
}

/** Every invariant a transition breaks: those of its next state, and what it drops. Pure. */
export function transitionViolations(from: BaseState, t: Transition): Violation[] {
  const out = stateViolations(t.next);
  const kept = new Set(t.next.deployments.map((d) => d.id));
  for (const id of t.drop) {
    if (kept.has(id)) out.push({ invariant: 'dropped-not-kept', message: `deployment ${id} is dropped but still recorded` });
  }
  if (new Set(t.drop).size !== t.drop.length) out.push({ invariant: 'dropped-once', message: `a deployment is dropped twice (${t.drop.join(', ')})` });
  if (from.version !== t.next.version) out.push({ invariant: 'version-kept', message: `the state version changes from ${from.version} to ${t.next.version}` });
  return out;
}

function fail(what: string, v: Violation[]): never {
  const first = v[0]!;
  const more = v.length > 1 ? `; also ${v.slice(1).map((x) => `${x.invariant} (${x.message})`).join('; ')}` : '';
  throw new StagedrootError('INVARIANT_VIOLATED', `Refusing to write ${what}: invariant ${first.invariant} broken: ${first.message}${more}. Nothing was written; this is a bug in stagedroot`, { value: v });
}

/** Throws INVARIANT_VIOLATED when a state (or the next state of its swap in progress) breaks an invariant. */
export function checkState(s: State | BaseState): void {
  const v = stateViolations(s);
  if (v.length > 0) fail('a state', v);
  const intent = 'intent' in s ? s.intent : null;
  if (intent) {
    const n = stateViolations(intent.next);
    if (n.length > 0) fail(`the state after the ${intent.op}`, n);
  }
}

/** Throws INVARIANT_VIOLATED when a transition breaks an invariant; called before anything is written. */
export function verifyTransition(from: BaseState, t: Transition, op: string): void {
  const v = transitionViolations(from, t);
  if (v.length > 0) fail(`the ${op}`, v);
}
