import { runningDeployment, type DeploymentStatus, type Status } from '../state/status.js';
import type { Failure } from '../state/schema.js';

/**
 * The MachineConfigNode conditions (openshift/api machineconfiguration/v1,
 * `StateProgress`) that a node library can know from its own records. Drained, Cordoned,
 * Uncordoned and the pinned-image-set conditions are the cluster's (the agent's drain,
 * the image pins) and are not produced here.
 */
export const MCN_CONDITIONS = ['UpdatePrepared', 'UpdateExecuted', 'AppliedFilesAndOS', 'UpdatePostActionComplete', 'RebootedNode', 'Resumed', 'UpdateComplete', 'Updated', 'NodeDegraded'] as const;
export type McnConditionType = (typeof MCN_CONDITIONS)[number];

/** A metav1.Condition. */
export interface McnCondition {
  type: McnConditionType;
  status: 'True' | 'False' | 'Unknown';
  /** CamelCase, as the CRD requires. */
  reason: string;
  message: string;
  lastTransitionTime: string;
}

/** The `status` of a MachineConfigNode, as far as the node knows it. */
export interface McnStatus {
  configVersion: { current?: string; desired: string };
  conditions: McnCondition[];
}

export interface McnOptions {
  /** The rendered config a deployment holds (default: its label, which a MachineConfig stage sets to metadata.name). */
  configOf?: (d: Pick<DeploymentStatus, 'id' | 'label'>) => string;
  /**
   * The status last reported (the MachineConfigNode's current status): a condition whose
   * status did not change keeps its lastTransitionTime, as Kubernetes' SetStatusCondition
   * keeps it.
   */
  previous?: McnStatus;
  /** The time of a transition the sysroot keeps no time for (a boot; default: now). */
  now?: () => Date;
}

/** Why a failed attempt at the desired config failed, per phase: the condition's reason. */
const FAILURE_REASON: Record<Failure['phase'], string> = {
  apply: 'UpdateRejected',
  validate: 'ValidationFailed',
  finalize: 'FinalizeFailed',
  boot: 'BootTriesExhausted',
  health: 'HealthCheckFailed',
  'apply-live': 'LiveApplyFailed',
};

/**
 * Maps a stagedroot status and the config the node should run to a MachineConfigNode
 * status (a pure function: the agent writes it to the cluster):
 *
 *   UpdatePrepared, UpdateExecuted,   a deployment holding the desired config is staged
 *   AppliedFilesAndOS                 (its tree built and validated: files, units, image)
 *   UpdatePostActionComplete          it is current: finalized, the reboot is what is left
 *   RebootedNode                      it is booted
 *   Resumed, UpdateComplete           it is booted and marked good by health
 *   Updated                           UpdateComplete and no reboot pending
 *   NodeDegraded                      the last failure is an attempt at the desired config
 *
 * Times come from the records: the deployment's creation for the stage conditions, the
 * last merge (the finalize into it) for UpdatePostActionComplete, the failure's time for
 * NodeDegraded; a boot and a mark-good keep no time, so those take `previous`'s time when
 * unchanged, else now.
 */
export function machineConfigNodeStatus(status: Status, desiredConfig: string, o: McnOptions = {}): McnStatus {
  const configOf = o.configOf ?? ((d) => d.label);
  const now = (o.now ?? (() => new Date()))().toISOString();
  const booted = runningDeployment(status);
  // The newest deployment holding the desired config that is on its way or running.
  const target = status.deployments.find((d) => !d.failed && configOf(d) === desiredConfig && (d.staged || d.current || d.booted));
  const f = status.lastFailure;
  const failedConfig = f === null ? null : configOf(status.deployments.find((d) => d.id === f.id) ?? { id: f.id, label: f.label });
  const degraded = f !== null && failedConfig === desiredConfig && !(target?.booted && target.good && !status.pendingReboot);

  const prev = new Map((o.previous?.conditions ?? []).map((c) => [c.type, c]));
  const cond = (type: McnConditionType, on: boolean, reason: string, message: string, at: string | undefined): McnCondition => {
    const s = on ? 'True' : 'False';
    const before = prev.get(type);
    const lastTransitionTime = before?.status === s ? before.lastTransitionTime : (on ? at : undefined) ?? now;
    return { type, status: s, reason: on ? reason : 'NotYetOccurred', message: on ? message : `This node has not yet entered the ${type} phase`, lastTransitionTime };
  };
  const what = target ? `deployment ${target.id} (${desiredConfig})` : desiredConfig;
  const staged = target !== undefined;
  const finalized = staged && (target.current || target.booted);
  const finalizedAt = status.lastMerge?.id === target?.id ? status.lastMerge?.at : target?.createdAt;
  // Applied live (apply-live): running without a reboot, as after the MCD's rebootless update.
  const live = staged && target.current && status.activeLive?.deployment === target.id;
  const runs = staged && (target.booted || live);
  const good = (runs && target.good) || live;
  const conditions: McnCondition[] = [
    cond('UpdatePrepared', staged, 'UpdatePrepared', `${what} was planned and checked against the running deployment`, target?.createdAt),
    cond('UpdateExecuted', staged, 'UpdateExecuted', `${what} is built and validated beside the running one`, target?.createdAt),
    cond('AppliedFilesAndOS', staged, 'AppliedFilesAndOS', `the files, units, kernel arguments and OS image of ${desiredConfig} are in ${what}`, target?.createdAt),
    cond('UpdatePostActionComplete', finalized, 'UpdatePostActionComplete', `${what} is current: it boots next`, finalizedAt),
    cond('RebootedNode', staged && target.booted, 'RebootedNode', `the node booted ${what}`, undefined),
    cond('Resumed', good, 'Resumed', live ? `${what} was applied without a reboot` : `${what} passed its health checks`, target?.liveApplied?.at),
    cond('UpdateComplete', good, 'UpdateComplete', live ? `${what} is active live: no reboot needed` : `${what} is booted and marked good`, target?.liveApplied?.at),
    cond('Updated', good && !status.pendingReboot, 'Updated', `the node runs ${desiredConfig}`, target?.liveApplied?.at),
    cond('NodeDegraded', degraded, degraded ? FAILURE_REASON[f!.phase] : '', degraded ? `${f!.phase} of ${desiredConfig} (deployment ${f!.id}) failed: ${f!.reason}`.slice(0, 32768) : '', f?.at),
  ];
  const current = booted ? configOf(booted) : undefined;
  return { configVersion: { ...(current ? { current } : {}), desired: desiredConfig }, conditions };
}
