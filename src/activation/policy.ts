import { z } from 'zod';
import { policyActionSchema, serviceNameSchema as serviceName, type PolicyAction } from '../state/activation.js';

/*
 * Node disruption policies in the shape of the MCO's MachineConfiguration CR
 * (operator.openshift.io/v1, spec.nodeDisruptionPolicy): what a change of a file, a unit
 * or the SSH key costs the node.
 */
export { policyActionSchema, type PolicyAction };

const absolutePath = z.string().regex(/^\/[^\0]*$/, 'an absolute path');

export const filePolicySchema = z.object({ path: absolutePath, actions: z.array(policyActionSchema).min(1) }).strict();
export const unitPolicySchema = z.object({ name: serviceName, actions: z.array(policyActionSchema).min(1) }).strict();
export const sshKeyPolicySchema = z.object({ actions: z.array(policyActionSchema) }).strict();

/** spec.nodeDisruptionPolicy (the user's part) and status...clusterPolicies (the merged result) share this shape. */
export const disruptionPolicySchema = z
  .object({
    files: z.array(filePolicySchema).default([]),
    units: z.array(unitPolicySchema).default([]),
    sshkey: sshKeyPolicySchema.default({ actions: [] }),
  })
  .strict();
export type DisruptionPolicy = z.infer<typeof disruptionPolicySchema>;
export type FilePolicy = z.infer<typeof filePolicySchema>;
export type UnitPolicy = z.infer<typeof unitPolicySchema>;

/** The service an action names, if any. */
export function serviceOf(a: PolicyAction): string | undefined {
  return a.type === 'Reload' ? a.reload.serviceName : a.type === 'Restart' ? a.restart.serviceName : undefined;
}
