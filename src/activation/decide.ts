import type { Activation, ActivationReason } from '../state/activation.js';
import { closestFilePolicy } from './closest-policy.js';
import type { DisruptionPolicy, PolicyAction } from './policy.js';
import { registriesConfDrainReason } from './registries-conf-safety.js';

export const REGISTRIES_CONF = '/etc/containers/registries.conf';

/** What a staged deployment changes against the booted one, as the decision reads it. */
export interface ChangeSummary {
  /** Absolute paths of files added, changed or removed (not units, not the SSH key). */
  files: readonly string[];
  /** Names of the systemd units whose files or enablement changed. */
  units: readonly string[];
  /** An SSH authorized key changed. */
  sshKey: boolean;
  /** What changes whatever a policy says: the OS image, the kernel, its arguments, ... */
  forced: readonly ActivationReason[];
  /** registries.conf before and after (null: absent), when it changed. */
  registriesConf?: { before: string | null; after: string | null };
}

const has = (actions: readonly PolicyAction[], ...types: PolicyAction['type'][]): boolean => actions.some((a) => types.includes(a.type));

/** The reasons a decision keeps: the first few of each kind (`why`), so that a kernel update's thousands of paths do not fill every state write and every status. */
export const REASONS_PER_KIND = 5;

function keepReasons(all: readonly ActivationReason[]): Pick<Activation, 'reasons' | 'reasonsOmitted'> {
  const perKind = new Map<string, number>();
  const reasons = all.filter((r) => {
    const n = (perKind.get(r.why) ?? 0) + 1;
    perKind.set(r.why, n);
    return n <= REASONS_PER_KIND;
  });
  const omitted = all.length - reasons.length;
  return omitted > 0 ? { reasons, reasonsOmitted: omitted } : { reasons };
}

const reboot = (reasons: readonly ActivationReason[]): Activation => ({ mode: 'reboot', drain: true, actions: [{ type: 'Reboot' }], ...keepReasons(reasons) });

/**
 * The activation decision: the MCO's calculatePostConfigChangeNodeDisruptionAction
 * (pkg/daemon/update.go) and isDrainRequiredForNodeDisruptionActions (pkg/daemon/drain.go),
 * with stagedroot's own rule that a change under /usr is part of the image (a reboot)
 * unless a policy under /usr/local names it. Where the MCO stops at the first path that
 * forces a reboot, every such path is named here (the first few of each kind, with a count
 * of the rest).
 */
export function decideActivation(change: ChangeSummary, policy: DisruptionPolicy): Activation {
  if (change.forced.length > 0) return reboot(change.forced);
  if (change.files.length === 0 && change.units.length === 0 && !change.sshKey) return { mode: 'live', drain: false, actions: [{ type: 'None' }], reasons: [] };

  const actions: PolicyAction[] = [];
  const reasons: ActivationReason[] = [];
  for (const path of change.files) {
    const p = closestFilePolicy(path, policy.files);
    if (p === undefined) reasons.push({ path, why: 'no disruption policy covers it' });
    else if (path.startsWith('/usr/') && !(p.path === '/usr/local' || p.path.startsWith('/usr/local/'))) reasons.push({ path, why: `under /usr, part of the OS image: only a policy under /usr/local makes it live (${p.path} covers it)` });
    else {
      if (has(p.actions, 'Reboot')) reasons.push({ path, why: `its policy (${p.path}) says Reboot` });
      actions.push(...p.actions);
    }
  }
  for (const name of change.units) {
    const u = policy.units.find((x) => x.name === name);
    if (u === undefined) reasons.push({ unit: name, why: 'no disruption policy covers this unit' });
    else {
      if (has(u.actions, 'Reboot')) reasons.push({ unit: name, why: 'its policy says Reboot' });
      actions.push(...u.actions);
    }
  }
  if (change.sshKey) {
    if (has(policy.sshkey.actions, 'Reboot')) reasons.push({ field: 'sshkey', why: 'the SSH key policy says Reboot' });
    actions.push(...policy.sshkey.actions);
  }
  if (reasons.length > 0) return reboot(reasons);

  let final = actions;
  if (has(actions, 'None')) final = has(actions, 'Drain', 'Reload', 'Restart', 'DaemonReload', 'Special') ? actions.filter((a) => a.type !== 'None') : [{ type: 'None' }];
  let drain = has(final, 'Drain');
  let drainWhy: string | undefined;
  if (!drain && has(final, 'Special')) {
    const rc = change.registriesConf;
    drainWhy = rc === undefined ? undefined : (registriesConfDrainReason(rc.before, rc.after) ?? undefined);
    drain = drainWhy !== undefined;
  }
  return { mode: 'live', drain, actions: final, reasons: drainWhy === undefined ? [] : [{ path: REGISTRIES_CONF, why: `drain: ${drainWhy}` }] };
}
