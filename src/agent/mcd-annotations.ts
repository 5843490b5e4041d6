import { runningDeployment, type DeploymentStatus, type Status } from '../state/status.js';

/** The node annotations the machine-config-daemon keeps (the controller reads them). */
export const MCD_ANNOTATION = {
  currentConfig: 'machineconfiguration.openshift.io/currentConfig',
  desiredConfig: 'machineconfiguration.openshift.io/desiredConfig',
  state: 'machineconfiguration.openshift.io/state',
  reason: 'machineconfiguration.openshift.io/reason',
} as const;

export type McdState = 'Done' | 'Working' | 'Degraded';

/** A type alias (not an interface) so that it fits a Kubernetes client's `Record<string, string>`. */
export type McdAnnotations = {
  'machineconfiguration.openshift.io/currentConfig': string;
  'machineconfiguration.openshift.io/desiredConfig': string;
  'machineconfiguration.openshift.io/state': McdState;
  'machineconfiguration.openshift.io/reason': string;
};

export interface McdOptions {
  /** The rendered config a deployment holds (default: its label, which the agent sets to the config name when staging). */
  configOf?: (d: Pick<DeploymentStatus, 'id' | 'label'>) => string;
  /** Longest reason written (annotations are small; the full text stays in status). Default 1024. */
  maxReasonLength?: number;
}

/**
 * Maps a stagedroot status and the config the node should run to the MCD's annotations
 * (a pure function: the agent writes the result to its Node object):
 *
 *   currentConfig  the config of the deployment the node runs now (the booted one, or
 *                  the one apply-live made active in it)
 *   Done           that deployment holds the desired config and is marked good with no
 *                  reboot pending, or was applied live (a rebootless update, as the MCD's)
 *   Degraded       the last failure (stage, validate, finalize, boot, health) is an attempt
 *                  at the desired config; reason says which phase and why
 *   Working        anything else: not staged yet, staged, waiting for the reboot, or
 *                  booted and under assessment
 */
export function mcdAnnotations(status: Status, desiredConfig: string, o: McdOptions = {}): McdAnnotations {
  const configOf = o.configOf ?? ((d) => d.label);
  const max = o.maxReasonLength ?? 1024;
  const running = runningDeployment(status);
  const live = running !== undefined && status.activeLive?.deployment === running.id;
  const currentConfig = running ? configOf(running) : '';
  let state: McdState = 'Working';
  let reason = '';
  const f = status.lastFailure;
  const failedConfig = f === null ? null : configOf(status.deployments.find((d) => d.id === f.id) ?? { id: f.id, label: f.label });
  if (running && currentConfig === desiredConfig && ((running.good && !status.pendingReboot) || live)) {
    state = 'Done';
  } else if (f !== null && failedConfig === desiredConfig) {
    state = 'Degraded';
    const text = `${f.phase} of ${desiredConfig} (deployment ${f.id}) failed: ${f.reason.replace(/\s*\n\s*/g, '; ')}`;
    reason = text.length > max ? `${text.slice(0, max - 3)}...` : text;
  }
  return {
    [MCD_ANNOTATION.currentConfig]: currentConfig,
    [MCD_ANNOTATION.desiredConfig]: desiredConfig,
    [MCD_ANNOTATION.state]: state,
    [MCD_ANNOTATION.reason]: reason,
  };
}
