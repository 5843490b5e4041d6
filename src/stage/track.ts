import { StagedrootError } from '../errors.js';
import { mustFind } from '../state/model.js';
import type { Layout } from '../state/layout.js';
import type { BaseState, DeploymentRecord } from '../state/schema.js';
import { readConfigRecord } from '../store/config-record.js';
import { fileSize } from '../fs/trees/fetch-file.js';
import { checkRegistryImage, type ImageCheck } from '../sources/registry/check.js';
import { parsePlatform } from '../sources/oci/platform.js';
import { formatReference, isRegistryReference, parseDockerReference, parsePullspec, type ImageReference } from '../sources/registry/reference.js';
import { registrySource, type RegistrySourceOptions } from '../sources/registry/source.js';
import type { Source } from '../sources/source.js';
import type { StageOptions, StageResult } from './stage.js';

/** Options of `upgrade` and `switch`: a stage's, and how the image is pulled. */
export interface UpdateOptions extends StageOptions {
  pull?: RegistrySourceOptions;
}

export interface UpdateResult extends StageResult {
  /** The reference pulled (normalised, as status's origin keeps it). */
  pullspec: string;
}

/** The deployment whose image `upgrade` pulls again, and the reference it tracks. */
export interface Tracked {
  deployment: DeploymentRecord;
  /** The staged deployment (a switch not booted yet), not the booted one. */
  staged: boolean;
  ref: ImageReference;
}

/**
 * What `upgrade` follows: the staged deployment's reference when one is staged from a
 * registry (an upgrade after a `switch` keeps the switch, as bootc's), else the booted
 * deployment's. A deployment not pulled from a registry tracks nothing.
 */
export function trackedImage(s: BaseState, layout: Layout): Tracked {
  const staged = s.staged === null ? undefined : mustFind(s, s.staged);
  const d = staged?.origin?.pullspec !== undefined ? staged : mustFind(s, s.booted ?? s.current);
  // An image a MachineConfig named came with that config: the image alone would drop the config's files.
  const config = d.origin?.pullspec !== undefined ? readConfigRecord(layout.deployment(d.id)) : null;
  if (config?.kind === 'machine-config' && config.osImageURL !== undefined && sameName(config.osImageURL, d.origin!.pullspec!)) {
    throw new StagedrootError('USAGE', `Deployment ${d.id} (${d.label}) is the image the MachineConfig ${config.name} names with that config over it: an upgrade would stage the image without the config; stage the next rendered MachineConfig (stage MC --pull) instead`, { value: d.id });
  }
  if (d === staged) return { deployment: staged, staged: true, ref: parsePullspec(staged.origin!.pullspec!) };
  if (d.origin?.pullspec === undefined) {
    const what = d.origin ? `the local image ${d.origin.digest}` : 'no image';
    throw new StagedrootError('USAGE', `The booted deployment ${d.id} (${d.label}) tracks no image in a registry (it runs ${what}): nothing to upgrade; \`stagedroot switch REF\` tracks one`, { value: d.id });
  }
  return { deployment: d, staged: false, ref: parsePullspec(d.origin.pullspec) };
}

/** Whether a MachineConfig's osImageURL is the pullspec a deployment was pulled by (a config record outlives its image). */
function sameName(osImageURL: string, pullspec: string): boolean {
  try {
    return formatReference(parsePullspec(osImageURL)) === pullspec;
  } catch {
    return false;
  }
}

/** `switch`'s argument: `docker://HOST/REPO:TAG` or a bare pullspec (`HOST/REPO@sha256:…`, as bootc switch takes it). */
export function switchReference(input: string): ImageReference {
  return isRegistryReference(input) ? parseDockerReference(input, { what: 'The image' }) : parsePullspec(input, { what: 'The image' });
}

/** The options a deployment's pull remembers (origin.pulledWith), with the flag each came from. */
const REMEMBERED = [
  ['authfile', '--authfile', 'The credentials file'],
  ['registriesConf', '--registries-conf', 'The registries configuration'],
  ['certsDir', '--certs-dir', 'The TLS files directory'],
  ['blobDir', '--blob-dir', 'The blob directory'],
] as const;

/**
 * The tracked deployment's platform and the paths of the options it was pulled with
 * (--authfile, --registries-conf, --certs-dir, --blob-dir, origin.pulledWith), kept by the
 * next pull unless others are given. A remembered file that is gone (an authfile, a
 * registries.conf) is USAGE naming it and the deployment, before anything is fetched:
 * the pull would otherwise go on anonymously, or without the mirrors it was staged with.
 */
async function pullOptions(t: Tracked | null, o: RegistrySourceOptions): Promise<RegistrySourceOptions> {
  const p = t?.deployment.origin?.platform;
  const r: RegistrySourceOptions = o.platform === undefined && p !== undefined ? { ...o, platform: parsePlatform(p) } : { ...o };
  const w = t?.deployment.origin?.pulledWith;
  if (t === null || w === undefined) return r;
  for (const [key, flag, what] of REMEMBERED) {
    const v = w[key];
    if (v === undefined || r[key] !== undefined) continue;
    if ((key === 'authfile' || key === 'registriesConf') && (await fileSize(v)) === null) {
      throw new StagedrootError('USAGE', `${what} ${v} that deployment ${t.deployment.id} (${t.deployment.label}) was pulled with (${flag}) does not exist: restore it, or give ${flag} again`, { option: key, value: v, path: v });
    }
    r[key] = v;
  }
  return r;
}

/** The source an upgrade (the tracked deployment given) or a switch (none) stages, and its pullspec. */
export async function updateSource(ref: ImageReference, t: Tracked | null, o: RegistrySourceOptions = {}): Promise<{ source: Source; pullspec: string }> {
  return { source: registrySource(ref, await pullOptions(t, o)), pullspec: formatReference(ref) };
}

/** What `upgrade --check` and `switch --check` say: the pull's check, and whether there is anything to do. */
export interface UpdateCheck extends ImageCheck {
  /** The deployment the digest is compared with (the staged one for an upgrade after a switch, else the booted). */
  against: string;
  /** That deployment already runs (or has staged) this digest: nothing to do. */
  upToDate: boolean;
}

export async function checkUpdate(s: BaseState, ref: ImageReference, t: Tracked | null, o: RegistrySourceOptions = {}): Promise<UpdateCheck> {
  const c = await checkRegistryImage(ref, await pullOptions(t, o));
  const d = t?.deployment ?? mustFind(s, s.booted ?? s.current);
  return { ...c, against: d.id, upToDate: d.origin?.digest === c.digest };
}
