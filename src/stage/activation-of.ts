import { decideActivation, REGISTRIES_CONF, type ChangeSummary } from '../activation/decide.js';
import { mergePolicies } from '../activation/merge-policies.js';
import { parsePolicyDocument } from '../activation/policy-document.js';
import type { DisruptionPolicy } from '../activation/policy.js';
import { StagedrootError } from '../errors.js';
import { ManifestIndex } from '../fs/manifests/manifest-index.js';
import { compareEntry } from '../fs/manifests/verify-tree.js';
import { readText } from '../fs/core/host-paths.js';
import type { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import type { Activation, ActivationReason } from '../state/activation.js';
import type { DeploymentRecord } from '../state/schema.js';

/** Where the running system keeps its disruption policy (a MachineConfiguration), relative to its root. */
export const POLICY_PATH = 'etc/stagedroot/disruption-policy.yaml';

/**
 * The policies a decision uses: the MCO defaults, with the user's MachineConfiguration
 * merged over them: `file` when given, else the booted tree's /etc/stagedroot/disruption-policy.yaml.
 */
export function loadDisruptionPolicy(booted: ReadOnlyTree, file?: string): DisruptionPolicy {
  let text: string | null;
  let what: string;
  if (file !== undefined) {
    what = file;
    text = readText(file);
    if (text === null) throw new StagedrootError('USAGE', `--disruption-policy ${file}: no such file`, { option: 'disruptionPolicy', value: file });
  } else {
    what = `/${POLICY_PATH}`;
    text = textIn(booted, POLICY_PATH);
  }
  return text === null ? mergePolicies({ files: [], units: [], sshkey: { actions: [] } }) : mergePolicies(parsePolicyDocument(text, what));
}

/** A file's text in a tree; null when absent, or when the tree's links cannot lead to a file there (a loop, an escape). */
function textIn(tree: ReadOnlyTree, p: string): string | null {
  try {
    return tree.readFile(p)?.toString('utf8') ?? null;
  } catch (err) {
    if (err instanceof StagedrootError && (err.code === 'APPLY_FAILED' || err.code === 'PATH_ESCAPE')) return null;
    throw err;
  }
}

const UNIT_FILE = /^etc\/systemd\/system\/(?:[^/]+\.(?:wants|requires)\/)?([^/]+\.(?:service|socket|target|mount|timer|path|slice|swap|automount))$/;
/** The SSH key file and the directories it lives in (Ignition writes ~/.ssh/authorized_keys, the MCO authorized_keys.d/ignition). */
const SSH_KEY = /(?:^|\/)\.ssh(?:\/authorized_keys(?:\.d(?:\/[^/]+)?)?)?$/;

/** Sorts changed tree paths into files, units and the SSH key; the kernel and initramfs are forced reboots. */
function summarize(paths: readonly string[], forced: ActivationReason[]): Omit<ChangeSummary, 'forced'> {
  const files: string[] = [];
  const units = new Set<string>();
  let sshKey = false;
  // A directory that is a parent of another changed path is decided by what changes below
  // it (the MCO's policies name files; a new file's new parent directory comes with it).
  const parents = new Set<string>();
  for (const p of paths) for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) parents.add(p.slice(0, i));
  for (const p of paths) {
    if (parents.has(p)) continue;
    const unit = UNIT_FILE.exec(p);
    if (unit) units.add(unit[1]!);
    else if (SSH_KEY.test(p)) sshKey = true;
    else if (p === 'boot' || p.startsWith('boot/') || p.startsWith('usr/lib/modules/')) forced.push({ path: `/${p}`, why: 'the kernel or initramfs changed' });
    else files.push(`/${p}`);
  }
  return { files, units: [...units], sshKey };
}

/** The paths of `candidates` whose entry differs between the two manifests (an update names paths it did not change). */
export function changedByManifests(baseManifest: string, newManifest: string, candidates: readonly string[]): string[] {
  const before = new ManifestIndex(baseManifest);
  const after = new ManifestIndex(newManifest);
  try {
    return candidates.filter((p) => {
      const a = before.find(p);
      const b = after.find(p);
      if (a === null || b === null) return a !== b;
      return compareEntry(a, b).length > 0;
    });
  } finally {
    before.close();
    after.close();
  }
}

export interface ActivationInput {
  base: DeploymentRecord;
  next: Pick<DeploymentRecord, 'origin' | 'kernelArguments'>;
  /** The paths whose entry the update changed (asked only when nothing forces a reboot already). */
  changed: () => readonly string[];
  /** The paths under shared directories (the machine's /var) the update changes: written at finalize, or at a live apply's commit. */
  sharedChanged?: () => readonly string[];
  baseTree: ReadOnlyTree;
  newTree: ReadOnlyTree;
  policy: DisruptionPolicy;
}

/** How the staged deployment can become active, against the deployment it was built from. */
export function activationOf(i: ActivationInput): Activation {
  const forced: ActivationReason[] = [];
  // An update with no image of its own (a config, a spec) keeps the image; its paths decide.
  if (i.next.origin !== undefined && i.base.origin?.digest !== i.next.origin.digest) forced.push({ field: 'osImageURL', why: `the OS image changed (${i.base.origin?.digest ?? 'none'} -> ${i.next.origin?.digest ?? 'none'})` });
  if (JSON.stringify(i.base.kernelArguments ?? []) !== JSON.stringify(i.next.kernelArguments ?? [])) forced.push({ field: 'kernelArguments', why: 'the kernel arguments changed' });
  const shared = forced.length > 0 ? [] : (i.sharedChanged?.() ?? []);
  if (shared.length > 0) {
    // Outside the live apply's journal, written at its commit after the actions ran: live only where the policies ask for no action.
    const alone = decideActivation({ ...summarize(shared, forced), forced: [...forced] }, i.policy);
    if (alone.mode !== 'live') forced.push(...alone.reasons);
    else if (alone.actions.some((a) => a.type !== 'None')) forced.push({ path: `/${shared[0]}`, why: `it is under a shared directory, written when the deployment becomes current, after the live actions (${alone.actions.map((a) => a.type).join(', ')}) would run` });
  }
  const changed = forced.length > 0 ? [] : [...i.changed(), ...shared];
  const summary: ChangeSummary = { ...summarize(changed, forced), forced };
  const rc = REGISTRIES_CONF.slice(1);
  if (summary.files.includes(REGISTRIES_CONF)) summary.registriesConf = { before: textIn(i.baseTree, rc), after: textIn(i.newTree, rc) };
  return decideActivation(summary, i.policy);
}
