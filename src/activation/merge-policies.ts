import { DEFAULT_POLICIES } from './default-policies.js';
import type { DisruptionPolicy } from './policy.js';

/**
 * The user's policies over the defaults, as the MCO's MergeClusterPolicies does it: a user
 * file (or unit) policy with a default's exact path (name) replaces it in place, others
 * are appended in the user's order; a user SSH policy with actions replaces the default.
 */
export function mergePolicies(user: DisruptionPolicy, defaults: DisruptionPolicy = DEFAULT_POLICIES): DisruptionPolicy {
  const files = defaults.files.map((f) => ({ ...f }));
  for (const u of user.files) {
    const i = defaults.files.findIndex((d) => d.path === u.path);
    if (i >= 0) files[i] = u;
    else files.push(u);
  }
  const units = defaults.units.map((u) => ({ ...u }));
  for (const u of user.units) {
    const i = defaults.units.findIndex((d) => d.name === u.name);
    if (i >= 0) units[i] = u;
    else units.push(u);
  }
  const sshkey = user.sshkey.actions.length === 0 ? { actions: [...defaults.sshkey.actions] } : user.sshkey;
  return { files, units, sshkey };
}
