import type { Activation } from '../state/activation.js';

const actionText = (a: Activation['actions'][number]): string => (a.type === 'Reload' ? `Reload ${a.reload.serviceName}` : a.type === 'Restart' ? `Restart ${a.restart.serviceName}` : a.type);

/** One line for the decision, then one per reason: what a person needs to know before choosing live or reboot. */
export function formatActivation(a: Activation): string {
  const head = a.mode === 'live' ? `activation: live without a reboot (${a.actions.map(actionText).join(', ')})${a.drain ? ', after a drain' : ''}` : 'activation: needs a reboot';
  const more = a.reasonsOmitted === undefined ? [] : [`  … and ${a.reasonsOmitted} more of these`];
  return [head, ...a.reasons.map((r) => `  ${r.path ?? (r.unit !== undefined ? `unit ${r.unit}` : r.field)}: ${r.why}`), ...more].join('\n') + '\n';
}
