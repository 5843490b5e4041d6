import { z } from 'zod';

/**
 * Node disruption policy actions in the shape of the MCO's MachineConfiguration CR
 * (operator.openshift.io/v1): the action type names are the MCO's own.
 */
export const ACTION_TYPES = ['None', 'Reload', 'Restart', 'DaemonReload', 'Drain', 'Reboot', 'Special'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];

/** A unit name as the MCO's API allows it (a service name, with its suffix). */
export const serviceNameSchema = z.string().regex(/^[a-zA-Z0-9:._\\@-]+\.(service|socket|target|mount|timer|path|slice|scope|swap|device|automount)$/, 'a systemd unit name such as crio.service');

export const policyActionSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('None') }).strict(),
  z.object({ type: z.literal('Reload'), reload: z.object({ serviceName: serviceNameSchema }).strict() }).strict(),
  z.object({ type: z.literal('Restart'), restart: z.object({ serviceName: serviceNameSchema }).strict() }).strict(),
  z.object({ type: z.literal('DaemonReload') }).strict(),
  z.object({ type: z.literal('Drain') }).strict(),
  z.object({ type: z.literal('Reboot') }).strict(),
  // The MCO reserves Special for /etc/containers/registries.conf (a CRI-O reload, a drain unless the change is safe).
  z.object({ type: z.literal('Special') }).strict(),
]);
export type PolicyAction = z.infer<typeof policyActionSchema>;


/** What forces a reboot (or a drain): a path, a unit or a field of the change, and why. */
export const activationReasonSchema = z
  .object({ path: z.string().optional(), unit: z.string().optional(), field: z.string().optional(), why: z.string() })
  .strict();
export type ActivationReason = z.infer<typeof activationReasonSchema>;

/** How a staged deployment can become active: live (its actions, no reboot) or at a reboot. */
export const activationSchema = z
  .object({
    mode: z.enum(['live', 'reboot']),
    drain: z.boolean(),
    actions: z.array(policyActionSchema),
    reasons: z.array(activationReasonSchema),
    /** How many more reasons of the same kinds were left out of `reasons` (a kernel update changes thousands of paths). */
    reasonsOmitted: z.number().int().positive().optional(),
  })
  .strict();
export type Activation = z.infer<typeof activationSchema>;
