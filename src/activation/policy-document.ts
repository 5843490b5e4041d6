import { z } from 'zod';
import { issuesError } from '../errors.js';
import { zodIssues } from '../sources/document.js';
import { parseMachineConfigText } from '../sources/machine-config/document.js';
import { disruptionPolicySchema, type DisruptionPolicy } from './policy.js';

/**
 * A MachineConfiguration (operator.openshift.io/v1), YAML or JSON as `oc get -o yaml`
 * prints it: only spec.nodeDisruptionPolicy is read (metadata and status are the
 * cluster's, and ignored); other spec fields are the operator's knobs, ignored too.
 */
const documentSchema = z.object({
  apiVersion: z.literal('operator.openshift.io/v1', { errorMap: () => ({ message: 'expected apiVersion operator.openshift.io/v1' }) }),
  kind: z.literal('MachineConfiguration', { errorMap: () => ({ message: 'expected kind MachineConfiguration' }) }),
  spec: z.object({ nodeDisruptionPolicy: disruptionPolicySchema.optional() }).passthrough().optional(),
});

/** The user's policies of a MachineConfiguration's text; `what` names the file in errors. */
export function parsePolicyDocument(text: string, what: string): DisruptionPolicy {
  const doc = parseMachineConfigText(text, what);
  const r = documentSchema.safeParse(doc);
  if (!r.success) throw issuesError(zodIssues(r.error), `The disruption policy ${what} is invalid`);
  return r.data.spec?.nodeDisruptionPolicy ?? disruptionPolicySchema.parse({});
}
