import type { Activation } from './activation.js';
import type { Layout } from './layout.js';
import type { BaseState, Failure, LiveApplied, MergeReport, Origin, SignatureRecord } from './schema.js';

/** The last merge as status shows it: kept paths absolute (host paths). */
export interface MergeStatus {
  id: string;
  at: string;
  carried: number;
  conflicts: { path: string; kept: string | null }[];
}

export interface DeploymentStatus {
  id: string;
  label: string;
  /** Absolute path of the deployment's tree. */
  path: string;
  createdAt: string;
  parent: string | null;
  status: 'ready' | 'failed';
  failed: boolean;
  good: boolean;
  triesLeft: number | null;
  pinned: boolean;
  locked: boolean;
  booted: boolean;
  current: boolean;
  staged: boolean;
  rollback: boolean;
  entries: number;
  /** Marked good by `health` after this many checks (0: no health checks configured); null: by hand or never. */
  healthChecks: number | null;
  /** Its kernel arguments (its parent's, changed by its update: Ignition or spec `kernelArguments`). */
  kernelArguments: string[];
  source?: string;
  /** An image deployment's origin (manifest digest, config labels). */
  origin?: Origin;
  /** The signature its source was verified with (key id, trusted comment). */
  signature?: SignatureRecord;
  /** The staged deployment's activation decision: live (the node disruption policy's actions) or reboot, with what forces it. */
  activation?: Activation;
  /** It became current without a reboot (apply-live): when, from which running deployment, with which actions, how many paths. */
  liveApplied?: LiveApplied;
  failure: Failure | null;
}

export interface Status {
  sysroot: string;
  booted: string | null;
  current: string;
  staged: string | null;
  rollback: string | null;
  /** True when the next boot changes what runs (current differs from booted, and is not active live in it). */
  pendingReboot: boolean;
  /**
   * Current was made active without a reboot (apply-live) and runs in the booted
   * deployment's root: `deployment` is current, `runningIn` the booted tree holding its
   * files; null otherwise. The next boot runs `deployment` with the /etc edits made since.
   */
  activeLive: { deployment: string; runningIn: string } | null;
  /**
   * The booted deployment is not current because an entry other than the default was
   * picked at boot (the boot menu, `grub-reboot`, `bootctl set-oneshot`): a choice, not a
   * failure. Nothing is marked bad for it; the next default boot runs current.
   */
  bootedByChoice: boolean;
  /** The staged deployment is held by a finalization lock. */
  finalizationLocked: boolean;
  lastFailure: Failure | null;
  finalizeFailure: (Failure & { reported: boolean }) | null;
  bootTries: number;
  /**
   * How this sysroot stores deployment trees: `btrfs` (each a subvolume, staged from a
   * snapshot of the booted one) or `portable` (plain directories, usr/ hardlinked).
   */
  storage: 'btrfs' | 'portable';
  /**
   * Each shared directory's tree path and the host path where it lives ({"var":
   * "/sysroot/shared/var"}): in a temp-dir sysroot, the running system's /var is there.
   */
  shared: Record<string, string>;
  /** Directories whose local changes finalize merges into a new deployment. */
  merged: string[];
  /** What the last finalize merged, or null. */
  lastMerge: MergeStatus | null;
  deployments: DeploymentStatus[];
}

/** A merge report as status shows it: each kept local version at its path under the sysroot `root`. */
export function mergeStatus(m: MergeReport, root: string): MergeStatus {
  return { ...m, conflicts: m.conflicts.map((c) => ({ path: c.path, kept: c.kept === null ? null : `${root}/${c.kept}` })) };
}

/** The status object (`status --json`), a pure view of the state. */
export function statusView(s: BaseState, layout: Layout, storage: Status['storage'] = 'portable'): Status {
  const staged = s.staged === null ? undefined : s.deployments.find((d) => d.id === s.staged);
  return {
    sysroot: layout.root,
    booted: s.booted,
    current: s.current,
    staged: s.staged,
    rollback: s.rollback,
    pendingReboot: s.booted !== s.current && !(s.activeLive?.deployment === s.current && s.activeLive.runningIn === s.booted),
    activeLive: s.activeLive ?? null,
    bootedByChoice: (s.bootedByChoice ?? false) && s.booted !== s.current,
    finalizationLocked: staged?.locked ?? false,
    lastFailure: s.lastFailure,
    finalizeFailure: s.finalizeFailure,
    bootTries: s.bootTries,
    storage,
    shared: Object.fromEntries((s.shared ?? []).map((rel) => [rel, layout.shared(rel)])),
    merged: s.merged ?? ['etc'],
    lastMerge: s.lastMerge ? mergeStatus(s.lastMerge, layout.root) : null,
    deployments: [...s.deployments]
      .sort((a, b) => Number(b.id) - Number(a.id))
      .map((d) => ({
        id: d.id,
        label: d.label,
        path: layout.tree(d.id),
        createdAt: d.createdAt,
        parent: d.parent,
        status: d.status,
        failed: d.status === 'failed',
        good: d.good,
        triesLeft: d.triesLeft,
        pinned: d.pinned,
        locked: d.locked,
        booted: d.id === s.booted,
        current: d.id === s.current,
        staged: d.id === s.staged,
        rollback: d.id === s.rollback,
        entries: d.entries,
        healthChecks: d.healthChecks ?? null,
        kernelArguments: d.kernelArguments ?? [],
        ...(d.source === undefined ? {} : { source: d.source }),
        ...(d.origin === undefined ? {} : { origin: d.origin }),
        ...(d.signature === undefined ? {} : { signature: d.signature }),
        ...(d.activation === undefined || d.id !== s.staged ? {} : { activation: d.activation }),
        ...(d.liveApplied === undefined ? {} : { liveApplied: d.liveApplied }),
        failure: d.failure,
      })),
  };
}

/**
 * The deployment the node runs now: the booted one, or, after apply-live, the deployment
 * active live in the booted root (current, its files written there).
 */
export function runningDeployment(s: Pick<Status, 'booted' | 'current' | 'activeLive' | 'deployments'>): DeploymentStatus | undefined {
  const id = s.activeLive && s.activeLive.runningIn === s.booted ? s.activeLive.deployment : (s.booted ?? s.current);
  return s.deployments.find((d) => d.id === id);
}
