import { issuesError, type Issue } from '../../errors.js';
import { kernelArgumentProblem } from '../../state/kernel-args.js';
import { IssueList } from '../ignition/issues.js';
import { splitKernelArguments } from './kernel-args.js';
import { isRecord } from '../../util/is-record.js';

export const MC_API_VERSION = 'machineconfiguration.openshift.io/v1';

/** A MachineConfig checked: what stagedroot applies from it. */
export interface CheckedMachineConfig {
  /** metadata.name ("rendered-worker-5f1c…"), or "" when it has none. */
  name: string;
  /** spec.config, an Ignition 3.x document (checked by the Ignition source). */
  ignition: unknown;
  /** spec.kernelArguments, each entry split as the machine-config-daemon splits it. */
  kernelArguments: string[];
  /** spec.osImageURL, when not empty. */
  osImageURL?: string;
  warnings: Issue[];
}

/** spec fields stagedroot applies, ignores with reason, or refuses until it supports them. */
const APPLIED = new Set(['config', 'kernelArguments', 'osImageURL']);
/** Refused when set to anything but their default (exit 3, naming the field). */
const REFUSED: Record<string, (v: unknown) => boolean> = {
  extensions: (v) => !(Array.isArray(v) && v.length === 0),
  kernelType: (v) => !(v === '' || v === 'default'),
  fips: (v) => v !== false,
};
/** Known, and meaningless without the refused fields: said, not applied. */
const IGNORED = new Set(['baseOSExtensionsContainerImage']);

/**
 * Checks a MachineConfig (machineconfiguration.openshift.io/v1) as the MCO renders it,
 * listing every problem: the apiVersion and kind; spec.config an Ignition 3.x config (an
 * older spec is refused naming its version: the MCO converts those before they reach a
 * node); spec.kernelArguments strings; spec.extensions, spec.kernelType and spec.fips
 * refused (SOURCE_UNSUPPORTED, naming the field) unless at their defaults; unknown
 * spec fields warned about, as Ignition's are. Null values are "unset", as Go decodes them.
 */
export function checkMachineConfig(raw: unknown, describe: string): CheckedMachineConfig {
  const what = `The MachineConfig ${describe}`;
  const issues = new IssueList();
  if (!isRecord(raw)) throw issuesError([{ code: 'SPEC_INVALID', path: '', message: 'a MachineConfig is an object', severity: 'error' }], `${what} is invalid`);
  if (raw.apiVersion !== MC_API_VERSION) issues.add('SOURCE_UNSUPPORTED', 'apiVersion', `${JSON.stringify(raw.apiVersion ?? null)} is not ${MC_API_VERSION}`);
  if (raw.kind !== 'MachineConfig') issues.add('SPEC_INVALID', 'kind', `${JSON.stringify(raw.kind ?? null)} is not MachineConfig`);
  const meta = raw.metadata ?? {};
  const name = isRecord(meta) && typeof meta.name === 'string' ? meta.name : '';
  if (!isRecord(meta)) issues.add('SPEC_INVALID', 'metadata', 'must be an object');
  const spec = raw.spec ?? {};
  if (!isRecord(spec)) {
    issues.add('SPEC_INVALID', 'spec', 'must be an object');
    issues.throwIfAny(`${what} is invalid`);
  }
  const s = spec as Record<string, unknown>;
  for (const [key, value] of Object.entries(s)) {
    if (value === null || APPLIED.has(key)) continue;
    if (Object.hasOwn(REFUSED, key)) {
      if (REFUSED[key]!(value)) issues.add('SOURCE_UNSUPPORTED', `spec.${key}`, `${JSON.stringify(value)}: spec.${key} is not supported yet (stagedroot applies spec.config, spec.kernelArguments and spec.osImageURL)`);
    } else if (IGNORED.has(key)) {
      if (value !== '') issues.warn('FIELD_IGNORED', `spec.${key}`, `ignored: it only matters with spec.extensions, which stagedroot does not apply`);
    } else {
      issues.warn('UNKNOWN_FIELD', `spec.${key}`, 'not a MachineConfig spec field stagedroot knows: ignored');
    }
  }

  const ignition = s.config ?? { ignition: { version: '3.2.0' } }; // no config: nothing but kernel arguments or an image
  const version = isRecord(ignition) && isRecord(ignition.ignition) ? ignition.ignition.version : undefined;
  if (!isRecord(ignition)) issues.add('SPEC_INVALID', 'spec.config', 'must be an Ignition config (an object)');
  else if (typeof version === 'string' && !version.startsWith('3.')) {
    issues.add('SOURCE_UNSUPPORTED', 'spec.config.ignition.version', `Ignition spec ${version} is not read: a MachineConfig on a node holds Ignition 3.x (the machine-config-operator converts spec 2 configs before rendering)`);
  }

  const kernelArguments: string[] = [];
  const kargs = s.kernelArguments ?? [];
  if (!Array.isArray(kargs)) issues.add('SPEC_INVALID', 'spec.kernelArguments', 'must be a list of strings');
  else {
    kargs.forEach((k, i) => {
      if (typeof k !== 'string') return issues.add('SPEC_INVALID', `spec.kernelArguments[${i}]`, 'must be a string');
      for (const a of splitKernelArguments(k)) {
        const problem = kernelArgumentProblem(a);
        if (problem !== null) issues.add('SPEC_INVALID', `spec.kernelArguments[${i}]`, `${JSON.stringify(a)}: ${problem}`);
        else kernelArguments.push(a);
      }
    });
  }

  const url = s.osImageURL ?? '';
  if (typeof url !== 'string') issues.add('SPEC_INVALID', 'spec.osImageURL', 'must be a string');
  issues.throwIfAny(`${what} cannot be applied`);
  return { name, ignition, kernelArguments, ...(url !== '' ? { osImageURL: url as string } : {}), warnings: issues.warnings };
}
