import { StagedrootError } from '../errors.js';
import type { BaseState, DeploymentRecord, Failure, LiveApplied, State } from './schema.js';

/**
 * The lifecycle as pure data: each transition takes a state and returns the next one
 * plus the deployments that became unreferenced. No disk access here; the callers in
 * src/stage, src/commit, src/boot and src/rollback write the result with one atomic swap.
 */
export interface Transition {
  next: BaseState;
  /** Deployments no longer referenced, to be removed after the new state is durable. */
  drop: string[];
}

export function withoutIntent(s: State): BaseState {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { intent, ...base } = s;
  return base;
}

/**
 * The state in effect, given where the `current` symlink points. A pointer swap in
 * progress (`intent`) has happened when the symlink already points at its target.
 */
export function effectiveState(s: State, linkId: string | null): BaseState {
  if (s.intent && linkId === s.intent.next.current) return s.intent.next;
  return withoutIntent(s);
}

export function find(s: BaseState, id: string | null): DeploymentRecord | undefined {
  return id === null ? undefined : s.deployments.find((d) => d.id === id);
}

export function mustFind(s: BaseState, id: string): DeploymentRecord {
  const d = find(s, id);
  if (!d) throw new StagedrootError('NOT_FOUND', `No deployment ${id} (known: ${s.deployments.map((x) => x.id).join(', ') || 'none'})`, { value: id });
  return d;
}

function replace(s: BaseState, rec: DeploymentRecord): BaseState {
  return { ...s, deployments: s.deployments.map((d) => (d.id === rec.id ? rec : d)) };
}

/** The state without these deployments; a merge report about one of them goes too (its kept copies are removed with it). */
export function dropIds(s: BaseState, ids: readonly string[]): BaseState {
  const gone = new Set(ids);
  const next = { ...s, deployments: s.deployments.filter((d) => !gone.has(d.id)) };
  return s.lastMerge && gone.has(s.lastMerge.id) ? { ...next, lastMerge: null } : next;
}

/** The newest good, ready deployment not in `exclude`. */
export function lastGood(s: BaseState, exclude: Iterable<string | null>): string | null {
  const ex = new Set(exclude);
  const good = s.deployments.filter((d) => d.good && d.status === 'ready' && !ex.has(d.id));
  good.sort((a, b) => Number(b.id) - Number(a.id));
  return good[0]?.id ?? null;
}

/** A new deployment record: not yet good, not under assessment; failed when given a failure. */
export function newRecord(o: { id: string; label: string; parent: string | null; at: string; source: string; entries?: number; bytes?: number; manifestSha256?: string | null; failure?: Failure; good?: boolean; kernelArguments?: string[] }): DeploymentRecord {
  return {
    id: o.id,
    label: o.label,
    createdAt: o.at,
    parent: o.parent,
    status: o.failure ? 'failed' : 'ready',
    good: o.good ?? false,
    triesLeft: null,
    pinned: false,
    locked: false,
    entries: o.entries ?? 0,
    bytes: o.bytes ?? 0,
    manifestSha256: o.manifestSha256 ?? null,
    source: o.source,
    failure: o.failure ?? null,
    ...(o.kernelArguments && o.kernelArguments.length > 0 ? { kernelArguments: o.kernelArguments } : {}),
  };
}

export function nextId(knownIds: Iterable<string>): string {
  let max = 0;
  for (const id of knownIds) if (/^\d+$/.test(id)) max = Math.max(max, Number(id));
  return String(max + 1).padStart(4, '0');
}

/** A successful stage: the new deployment is staged; a previously staged or failed one is superseded. */
/**
 * Failed deployments a new stage supersedes: never one still booted, current or rollback
 * (a deployment marked bad keeps running until the reboot), never a pinned one.
 */
function supersededFailures(s: BaseState): string[] {
  const inUse = new Set([s.booted, s.current, s.rollback]);
  return s.deployments.filter((d) => d.status === 'failed' && !d.pinned && !inUse.has(d.id)).map((d) => d.id);
}

/** A staged deployment built on `id` goes when `id` is found bad: finalizing it would undo the rollback. */
function unstageChildOf(s: BaseState, id: string): Transition {
  const staged = find(s, s.staged);
  if (!staged || staged.parent !== id) return { next: s, drop: [] };
  return { next: dropIds({ ...s, staged: null }, [staged.id]), drop: [staged.id] };
}

/** What a new stage builds on: the booted deployment, or current when the booted one was found bad. */
export function stageBase(s: BaseState): string {
  const booted = find(s, s.booted);
  return booted && booted.status !== 'failed' ? liveEtcOf(s)! : s.current;
}

/**
 * The deployment whose etc/ the running root holds: the booted one, or the one apply-live
 * made current while the booted tree still runs (its files written there). What a stage
 * builds on, and the base of the next /etc merge.
 */
export function liveEtcOf(s: BaseState): string | null {
  return s.activeLive && s.activeLive.runningIn === s.booted ? s.activeLive.deployment : s.booted;
}

/** Records that `id` was handed out (a later stage never takes it again). */
function claim(s: BaseState, id: string): BaseState {
  return Number(id) > Number(s.lastId) ? { ...s, lastId: id } : s;
}

export function stageSucceeded(s: BaseState, rec: DeploymentRecord): Transition {
  const drop = [...(s.staged === null ? [] : [s.staged]), ...supersededFailures(s)];
  const next = dropIds(claim({ ...s, staged: rec.id, lastFailure: null }, rec.id), drop);
  return { next: { ...next, deployments: [...next.deployments, rec] }, drop };
}

/** A failed stage: recorded (its tree kept when `rec` is given); what was staged stays staged. */
export function stageFailed(s: BaseState, failure: Failure, rec: DeploymentRecord | null): Transition {
  const drop = supersededFailures(s);
  const next = dropIds(claim({ ...s, lastFailure: failure }, failure.id), drop);
  return { next: rec ? { ...next, deployments: [...next.deployments, rec] } : next, drop };
}

/** Finalize: the staged deployment becomes current; the old current becomes rollback if it was good. */
export function finalizeTransition(s: BaseState): Transition {
  if (s.staged === null) throw new StagedrootError('NOTHING_STAGED', 'Nothing is staged');
  const staged = mustFind(s, s.staged);
  const oldCurrent = mustFind(s, s.current);
  const rollback = oldCurrent.good && oldCurrent.status === 'ready' && oldCurrent.id !== staged.id ? oldCurrent.id : s.rollback;
  // A finalize carries the running /etc into the new deployment: a live apply's edits are in it then.
  let next: BaseState = { ...s, current: staged.id, staged: null, rollback, activeLive: null };
  next = replace(next, { ...staged, triesLeft: staged.good ? null : s.bootTries });
  // A deployment finalized earlier but never booted is superseded: it was never good.
  const drop = !oldCurrent.good && oldCurrent.id !== s.booted && oldCurrent.id !== rollback && !oldCurrent.pinned ? [oldCurrent.id] : [];
  return { next: dropIds(next, drop), drop };
}

/** A finalize that failed: recorded durably, the staged deployment marked failed and unstaged. */
export function finalizeFailed(s: BaseState, failure: Failure): Transition {
  const staged = s.staged === null ? undefined : find(s, s.staged);
  let next: BaseState = { ...s, staged: null, lastFailure: failure, finalizeFailure: { ...failure, reported: false } };
  if (staged) next = replace(next, { ...staged, status: 'failed', failure });
  return { next, drop: [] };
}

export type BootEvent =
  | { kind: 'booted'; id: string; triesLeft: number | null }
  | { kind: 'fell-back'; from: string; to: string; reason: string };

/**
 * What the initramfs step (prepare-root) recorded in /run/stagedroot/booted: the
 * deployment it mounted as the root, the tries it left (it used one), and the deployment
 * whose tries were used up when it booted the fallback instead.
 */
export interface BootRecord {
  id: string;
  triesLeft: number | null;
  fellBackFrom: string | null;
}

/** Where the initramfs goes when the current deployment's tries are used up: the rollback if good, else the newest good one. */
export function fallbackTarget(s: BaseState, from: string): string | null {
  return s.rollback !== null && s.rollback !== from && find(s, s.rollback)?.good ? s.rollback : lastGood(s, [from]);
}

/**
 * The files the initramfs reads, as the state implies them: while the current deployment
 * is under assessment, its tries (boot-tries/ID) and the fallback; and the rollback
 * deployment (where it goes when the deployment it was to boot is broken).
 */
export function bootFiles(s: BaseState): { tries: { id: string; left: number } | null; fallback: string | null; rollback: string | null } {
  const cur = find(s, s.current);
  // The last resort of the initramfs when the deployment it was to boot is broken.
  const rollback = s.rollback !== null && find(s, s.rollback)?.good ? s.rollback : null;
  if (!cur || cur.good || cur.triesLeft === null) return { tries: null, fallback: null, rollback };
  return { tries: { id: cur.id, left: cur.triesLeft }, fallback: fallbackTarget(s, cur.id), rollback };
}

type BootOutcome = Transition & { event: BootEvent; finalizeFailure: Failure | null };

/** `cur` is given up (its tries are used): `to` boots and becomes current; `cur` is recorded as failed in phase boot. */
function fallBack(base: BaseState, cur: DeploymentRecord, to: string, reason: string, at: string, ff: Failure | null): BootOutcome {
  const failure: Failure = { id: cur.id, label: cur.label, phase: 'boot', reason, at };
  let next: BaseState = { ...base, current: to, booted: to, lastFailure: failure };
  next = replace(next, { ...cur, status: 'failed', triesLeft: 0, failure });
  next = { ...next, rollback: lastGood(next, [to]) };
  const unstaged = unstageChildOf(next, cur.id);
  return { next: unstaged.next, drop: unstaged.drop, event: { kind: 'fell-back', from: cur.id, to, reason }, finalizeFailure: ff };
}

/**
 * Early boot. With a record from the initramfs (a real host), the initramfs has counted
 * the try and chosen the root: the state follows it, and a fallback it made is recorded
 * as the failure of the deployment it gave up. Without one (temp-dir sysroots, hosts
 * without the initramfs step), this plays the bootloader's part: the current deployment
 * is booted and one of its tries used; one with no tries left is skipped and the last
 * good one booted instead, the skipped one recorded as failed.
 */
export function bootTransition(s: BaseState, at: string, record: BootRecord | null = null): BootOutcome {
  const o = bootOutcome(s, at, record);
  // Booted other than current, and not by a fallback of the initramfs: an entry picked at boot (a choice).
  const choice = o.event.kind === 'booted' && o.next.booted !== o.next.current && (record?.fellBackFrom ?? null) === null;
  return { ...o, next: { ...o.next, bootedByChoice: choice } };
}

function bootOutcome(s: BaseState, at: string, record: BootRecord | null): BootOutcome {
  const ff = s.finalizeFailure && !s.finalizeFailure.reported ? s.finalizeFailure : null;
  const base: BaseState = ff ? { ...s, finalizeFailure: { ...s.finalizeFailure!, reported: true } } : s;
  const cur = mustFind(base, base.current);
  if (record !== null && find(base, record.id)) {
    if (record.fellBackFrom === cur.id && record.id !== cur.id && !cur.good) {
      // The boot hook syncs triesLeft from each boot's record: still at its start value, no boot of it reached the hook.
      const neverReached = cur.triesLeft === null || cur.triesLeft >= base.bootTries;
      const reason = neverReached
        ? `deployment ${cur.id} did not reach the boot hook in ${base.bootTries} tries (counted by the initramfs)`
        : `deployment ${cur.id} used all ${base.bootTries} boot tries without being marked good (counted by the initramfs)`;
      return fallBack(base, cur, record.id, reason, at, ff);
    }
    const booted = mustFind(base, record.id);
    if (booted.good || booted.id !== cur.id) {
      return { next: { ...base, booted: booted.id }, drop: [], event: { kind: 'booted', id: booted.id, triesLeft: booted.good ? null : booted.triesLeft }, finalizeFailure: ff };
    }
    const left = record.triesLeft ?? Math.max(0, (cur.triesLeft ?? base.bootTries) - 1);
    const next = replace({ ...base, booted: cur.id }, { ...cur, triesLeft: left });
    return { next, drop: [], event: { kind: 'booted', id: cur.id, triesLeft: left }, finalizeFailure: ff };
  }
  if (cur.good) {
    return { next: { ...base, booted: cur.id }, drop: [], event: { kind: 'booted', id: cur.id, triesLeft: null }, finalizeFailure: ff };
  }
  const tries = cur.triesLeft ?? base.bootTries;
  if (tries > 0) {
    const next = replace({ ...base, booted: cur.id }, { ...cur, triesLeft: tries - 1 });
    return { next, drop: [], event: { kind: 'booted', id: cur.id, triesLeft: tries - 1 }, finalizeFailure: ff };
  }
  const to = fallbackTarget(base, cur.id);
  if (to === null) {
    // Nothing to fall back to: boot it anyway rather than leave the machine without a root.
    return { next: { ...base, booted: cur.id }, drop: [], event: { kind: 'booted', id: cur.id, triesLeft: 0 }, finalizeFailure: ff };
  }
  return fallBack(base, cur, to, `deployment ${cur.id} used all ${base.bootTries} boot tries without being marked good`, at, ff);
}

/** Health checks passed (`checks` of them; null: marked good by hand): the booted deployment is good. */
export function markGoodTransition(s: BaseState, checks: number | null = null): Transition {
  if (s.booted === null) throw new StagedrootError('INVALID_TRANSITION', 'Nothing has been booted yet: run `stagedroot boot` first');
  const b = mustFind(s, s.booted);
  return { next: replace(s, { ...b, good: true, triesLeft: null, status: 'ready', failure: null, healthChecks: checks }), drop: [] };
}

/** Health checks failed: the booted deployment is bad; current goes back to the last good one. */
export function markBadTransition(s: BaseState, failure: Failure): Transition {
  if (s.booted === null) throw new StagedrootError('INVALID_TRANSITION', 'Nothing has been booted yet: run `stagedroot boot` first');
  const b = mustFind(s, s.booted);
  const to = s.rollback !== null && s.rollback !== b.id && find(s, s.rollback)?.good ? s.rollback : lastGood(s, [b.id]);
  if (to === null) {
    throw new StagedrootError('NO_ROLLBACK', `Deployment ${b.id} is bad but there is no good deployment to go back to`, { value: b.id });
  }
  let next: BaseState = { ...s, lastFailure: failure };
  next = replace(next, { ...b, good: false, status: 'failed', triesLeft: 0, failure });
  // The booted deployment stays booted until the reboot; current points at the good one.
  const current = s.current === b.id || !find(next, s.current)?.good ? to : s.current;
  next = { ...next, current, rollback: lastGood(next, [current]) };
  return unstageChildOf(next, b.id);
}

/** Manual rollback: the rollback deployment becomes current; the old current becomes rollback if good. */
export function rollbackTransition(s: BaseState, opts: { discardStaged?: boolean } = {}): Transition {
  if (s.rollback === null) throw new StagedrootError('NO_ROLLBACK', 'There is no rollback deployment');
  if (s.staged !== null && !opts.discardStaged) {
    throw new StagedrootError(
      'INVALID_TRANSITION',
      `Deployment ${s.staged} is staged and would be finalized over the rollback at the next shutdown; discard it first (or pass --discard-staged)`,
      { value: s.staged },
    );
  }
  const drop = s.staged !== null ? [s.staged] : [];
  const old = mustFind(s, s.current);
  const target = s.rollback;
  let next: BaseState = dropIds({ ...s, staged: null, current: target }, drop);
  next = { ...next, rollback: old.good && old.status === 'ready' ? old.id : lastGood(next, [target]) };
  return { next, drop };
}

export function discardTransition(s: BaseState): Transition {
  if (s.staged === null) throw new StagedrootError('NOTHING_STAGED', 'Nothing is staged');
  return { next: dropIds({ ...s, staged: null }, [s.staged]), drop: [s.staged] };
}

/** Protected deployments are never pruned. */
export function protectedIds(s: BaseState): Set<string> {
  const ids = [s.current, s.booted, s.staged, s.rollback, s.lastFailure?.id ?? null];
  const set = new Set(ids.filter((x): x is string => x !== null));
  for (const d of s.deployments) if (d.pinned) set.add(d.id);
  return set;
}

/** Keeps the `keep` newest deployments plus every protected one. */
export function pruneTransition(s: BaseState, keep: number): Transition {
  const prot = protectedIds(s);
  const newestFirst = [...s.deployments].sort((a, b) => Number(b.id) - Number(a.id));
  const kept = new Set(newestFirst.slice(0, keep).map((d) => d.id));
  const drop = newestFirst.filter((d) => !prot.has(d.id) && !kept.has(d.id)).map((d) => d.id);
  return { next: dropIds(s, drop), drop };
}

export function setPinned(s: BaseState, id: string, pinned: boolean): Transition {
  return { next: replace(s, { ...mustFind(s, id), pinned }), drop: [] };
}

export function setLocked(s: BaseState, locked: boolean): Transition {
  if (s.staged === null) throw new StagedrootError('NOTHING_STAGED', 'Nothing is staged');
  return { next: replace(s, { ...mustFind(s, s.staged), locked }), drop: [] };
}

/**
 * apply-live's commit: the staged deployment becomes current as at a finalize (the old
 * current its rollback), and the booted tree, which now runs it, is named as where its
 * /etc lives until the next finalize or boot carries the edits made there (activeLive).
 */
export function applyLiveTransition(s: BaseState, live: LiveApplied): Transition {
  const t = finalizeTransition(s);
  const id = s.staged!;
  if (s.booted === null) throw new StagedrootError('INVALID_TRANSITION', 'Nothing was booted: a live apply needs a running deployment');
  const next = replace(t.next, { ...mustFind(t.next, id), liveApplied: live });
  return { next: { ...next, activeLive: { deployment: id, runningIn: s.booted } }, drop: t.drop };
}

/** The /etc edits made in the running tree after a live apply are carried into the deployment it made current (its manifest's new digest). */
export function liveCarriedTransition(s: BaseState, manifestSha256: string | null): Transition {
  if (!s.activeLive) return { next: s, drop: [] };
  const d = mustFind(s, s.activeLive.deployment);
  return { next: { ...replace(s, { ...d, manifestSha256 }), activeLive: null }, drop: [] };
}
