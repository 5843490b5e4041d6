import type { ChangeOp, ChangeSet } from '../../changeset.js';
import { StagedrootError, type Issue } from '../../errors.js';
import type { ConfigRecord } from '../../state/config-record.js';
import type { KernelArgumentChange } from '../../state/kernel-args.js';
import { checkIgnition, type CheckedIgnition } from '../ignition/parse.js';
import { planIgnition, type PlanOptions } from '../ignition/plan.js';
import type { Platform } from '../oci/platform.js';
import type { PlanContext, Source, SourceInfo } from '../source.js';
import { checkMachineConfig, type CheckedMachineConfig } from './check.js';
import { ownedPaths } from '../config-owned/owned-paths.js';
import { releaseOps } from '../config-owned/release.js';
import { parseMachineConfigText } from './document.js';
import { osImageSource, parseImageReference } from './os-image.js';
import { parsePullspec } from '../registry/reference.js';
import { registrySource, type RegistrySourceOptions } from '../registry/source.js';

export { checkMachineConfig, type CheckedMachineConfig } from './check.js';
export { parseMachineConfigText, isMachineConfig } from './document.js';

export interface MachineConfigOptions extends PlanOptions {
  /**
   * Where spec.osImageURL is found: an OCI layout directory or an oci-archive holding
   * that reference or digest. Without it, a config naming an image other than the one
   * the booted deployment runs is applied over the booted tree, with a warning.
   */
  imageStore?: string;
  /**
   * Pull spec.osImageURL (a bare pullspec) from its registry when no imageStore is given,
   * as the MCD does, with these options (credentials, TLS files, blob directory). Without
   * it (and without a store), nothing is pulled.
   */
  registry?: RegistrySourceOptions;
  /** The image's platform (default: this host's). */
  platform?: Platform;
  /**
   * Configs of one owner replace each other: the next one removes the kernel arguments
   * and paths the previous one added and no longer lists (default "machine-config": a
   * node follows one stream of rendered configs).
   */
  owner?: string;
  /** For messages ("mc.yaml"). */
  describe?: string;
}

const PREFIX = 'spec.config';

/**
 * A MachineConfig (machineconfiguration.openshift.io/v1, as the MCO renders it) already
 * in memory, as a source: spec.config is applied as an Ignition config, spec.kernelArguments
 * declaratively (the previous config's removed, these appended), spec.osImageURL resolved
 * in the caller's image store and staged with the config as one deployment.
 */
export function machineConfigSource(doc: unknown, o: MachineConfigOptions = {}): Source {
  const describe = o.describe ?? 'config';
  let checked: CheckedMachineConfig | undefined;
  const check = (): CheckedMachineConfig => (checked ??= checkMachineConfig(doc, describe));
  let image: Source | null | undefined;
  const imageOf = (): Source | null => {
    if (image !== undefined) return image;
    const url = check().osImageURL;
    if (url === undefined) return (image = null);
    if (o.imageStore !== undefined) return (image = osImageSource(o.imageStore, url, { platform: o.platform }));
    if (o.registry === undefined) return (image = null);
    // As MachineConfigs write it: a pullspec without docker://, a bad one the config's own error.
    const ref = parsePullspec(url, { code: 'SPEC_INVALID', what: 'spec.osImageURL' });
    return (image = registrySource(ref, { ...o.registry, ...(o.platform ? { platform: o.platform } : {}) }));
  };
  return {
    kind: 'machine-config',
    describe: `machine-config ${describe}`,
    async inspect(): Promise<SourceInfo> {
      const mc = check();
      const img = imageOf();
      const info = img ? await img.inspect!() : {};
      return { ...(info.origin ? { origin: info.origin, withConfig: true } : {}), ...(mc.name ? { label: mc.name } : {}) };
    },
    async plan(base, context): Promise<ChangeSet> {
      const mc = check();
      const ign = prefixed(() => checkIgnition(mc.ignition, describe));
      const prior = context?.config?.owner === (o.owner ?? 'machine-config') ? context.config : null;
      const warnings: Issue[] = [...mc.warnings, ...ign.warnings.map(prefixIssue)];
      const kernelArguments: KernelArgumentChange = { ...ign.config.kernelArguments, deleteIfPresent: prior?.kernelArguments ?? [], append: mc.kernelArguments };
      const record: ConfigRecord = { version: 1, kind: 'machine-config', owner: o.owner ?? 'machine-config', name: mc.name || describe, kernelArguments: mc.kernelArguments, owned: [], ...(mc.osImageURL ? { osImageURL: mc.osImageURL } : {}) };
      const what = `MachineConfig ${mc.name || describe}`;
      const args = `${mc.kernelArguments.length} kernel argument${mc.kernelArguments.length === 1 ? '' : 's'}`;
      const img = imageOf();
      const origin = img ? (await img.inspect!()).origin : undefined;
      // The image the booted deployment runs needs no new tree (known by the store's digest, or the URL's).
      const wanted = origin?.digest ?? (mc.osImageURL ? parseImageReference(mc.osImageURL).digest : undefined);
      const sameImage = wanted !== undefined && context?.origin?.digest === wanted;
      if (img && !sameImage) {
        // Image and config, one deployment: the image replaces the tree, the config is planned against it.
        const imageCs = await img.plan(base, context);
        return {
          ...imageCs,
          description: `${what}: ${imageCs.description}; ${args}; its Ignition config planned against the image`,
          label: mc.name || imageCs.label,
          kernelArguments,
          config: record,
          warnings: [...(imageCs.warnings ?? []), ...warnings],
          onTop: async (tree) => {
            const cs = prefixed(() => planIgnition(ign, tree, describe, o));
            // Over a new image the previous config's paths are gone already; the originals are the image's.
            const own = ownedPaths(ign.config, tree, null);
            record.owned = own.owned;
            return { ...cs, warnings: [...(cs.warnings ?? []).filter((w) => !ign.warnings.includes(w)).map(prefixIssue), ...own.warnings.map(originalNotKept)] };
          },
        };
      }
      if (mc.osImageURL !== undefined && !sameImage) warnings.push(imageNotApplied(mc.osImageURL, context));
      const cs = prefixed(() => planIgnition(ign, base, describe, o));
      const own = ownedPaths(ign.config, base, prior);
      const release = releaseOps(prior, own.owned, base);
      record.owned = own.owned;
      const ops = [...release.ops, ...(cs.ops as ChangeOp[])];
      const letGo = release.released.filter((r) => r.action !== 'kept').length;
      return {
        ...cs,
        ops,
        count: ops.length,
        description: `${what}: ${cs.description}; ${args}${letGo ? `; ${letGo} path${letGo === 1 ? '' : 's'} the previous config owned let go` : ''}`,
        ...(mc.name ? { label: mc.name } : {}),
        kernelArguments,
        config: record,
        warnings: [
          ...warnings,
          ...(cs.warnings ?? []).filter((w) => !ign.warnings.includes(w)).map(prefixIssue),
          ...own.warnings.map(originalNotKept),
          ...release.warnings.map((w): Issue => ({ code: 'OWNED_DIRECTORY_KEPT', path: w.path, message: w.message, severity: 'warning' })),
        ],
      };
    },
  };
}

/** A MachineConfig file already read (the bytes detected and signed), parsed when planned. */
export function machineConfigDocumentSource(p: string, data: Buffer, o: MachineConfigOptions = {}): Source {
  let doc: unknown;
  const parsed = (): unknown => (doc ??= parseMachineConfigText(data.toString('utf8'), `The MachineConfig ${p}`));
  let inner: Source | undefined;
  const get = (): Source => (inner ??= machineConfigSource(parsed(), { ...o, describe: p }));
  return {
    kind: 'machine-config',
    describe: `machine-config ${p}`,
    inspect: async () => get().inspect!(),
    plan: async (base, c?: PlanContext) => get().plan(base, c),
  };
}

/** spec.osImageURL names an image that was not given: the config goes over the booted tree, and this says so. */
function imageNotApplied(url: string, context: PlanContext | undefined): Issue {
  const running = context?.origin?.digest;
  const why = running === undefined ? 'the booted deployment was not staged from an image' : `the booted deployment runs ${running}`;
  return {
    code: 'OS_IMAGE_NOT_APPLIED',
    path: 'spec.osImageURL',
    message: `${url} was not applied: no image store was given (--image-store) and it was not pulled (--pull), and ${why}; the config is applied over the booted tree`,
    severity: 'warning',
  };
}

function originalNotKept(message: string): Issue {
  return { code: 'ORIGINAL_NOT_KEPT', path: message.slice(1, message.indexOf(' ')), message, severity: 'warning' };
}

/** Runs an Ignition step, its errors' and issues' field paths under spec.config. */
function prefixed<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof StagedrootError) || err.issues.length === 0) throw err;
    const issues = err.issues.map(prefixIssue);
    throw new StagedrootError(err.code, err.message.replace(/^The Ignition config /, `The Ignition config (${PREFIX}) of `), { issues, path: issues.find((i) => i.severity === 'error')?.path, cause: err });
  }
}

function prefixIssue(i: Issue): Issue {
  return { ...i, path: i.path === '' ? PREFIX : `${PREFIX}.${i.path}` };
}

export type { CheckedIgnition };
