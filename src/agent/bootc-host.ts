import type { DeploymentStatus, Status } from '../state/status.js';

/** bootc's ImageStatus: what an image deployment runs. */
export interface BootcImageStatus {
  image: { image: string; transport: string };
  imageDigest: string;
  architecture: string;
  version: string | null;
  timestamp: string | null;
}

/** bootc's BootEntry, the fields a stagedroot deployment can fill. */
export interface BootcBootEntry {
  image: BootcImageStatus | null;
  cachedUpdate: null;
  incompatible: boolean;
  pinned: boolean;
  /** Finalization lock (bootc's `--download-only`): finalize leaves it staged. */
  downloadOnly: boolean;
  softRebootCapable: boolean;
  store: null;
  ostree: null;
  composefs: null;
}

/** A BootcHost document (`bootc status --format json`, org.containers.bootc/v1). */
export interface BootcHost {
  apiVersion: 'org.containers.bootc/v1';
  kind: 'BootcHost';
  metadata: { name: 'host' };
  spec: { image: { image: string; transport: string } | null; bootOrder: 'default' | 'rollback' };
  status: {
    staged: BootcBootEntry | null;
    booted: BootcBootEntry | null;
    rollback: BootcBootEntry | null;
    otherDeployments: BootcBootEntry[];
    rollbackQueued: boolean;
    readOnly: boolean;
    type: 'bootcHost' | null;
    usrOverlay: null;
  };
}

const VERSION_LABEL = 'org.opencontainers.image.version';

/**
 * A stagedroot status as a BootcHost document, so that tools written for bootc can read a
 * stagedroot node (a pure function):
 *
 *   staged    the staged deployment, or the finalized one waiting for its reboot
 *   booted    the booted deployment
 *   rollback  the rollback deployment; `rollbackQueued` when the next boot goes back to an
 *             older deployment (after `rollback` or a failed boot assessment)
 *   otherDeployments  pinned deployments that are none of these
 *
 * A deployment built from an OCI image carries its image (reference, manifest digest,
 * architecture, version label); other deployments have `image: null`, as bootc shows a
 * deployment it did not install from an image.
 */
export function bootcHost(status: Status, o: { hostArchitecture?: string } = {}): BootcHost {
  const byId = new Map(status.deployments.map((d) => [d.id, d]));
  const entry = (id: string | null | undefined): BootcBootEntry | null => {
    const d = id == null ? undefined : byId.get(id);
    return d ? bootEntry(d, o.hostArchitecture ?? 'amd64') : null;
  };
  const waiting = status.pendingReboot && status.booted !== null && Number(status.current) > Number(status.booted) ? status.current : null;
  const rollbackQueued = status.pendingReboot && status.booted !== null && Number(status.current) < Number(status.booted);
  const stagedId = status.staged ?? waiting;
  const shown = new Set([stagedId, status.booted, status.rollback]);
  const booted = entry(status.booted);
  return {
    apiVersion: 'org.containers.bootc/v1',
    kind: 'BootcHost',
    metadata: { name: 'host' },
    spec: { image: booted?.image?.image ?? null, bootOrder: rollbackQueued ? 'rollback' : 'default' },
    status: {
      staged: entry(stagedId),
      booted,
      rollback: entry(rollbackQueued ? status.current : status.rollback),
      otherDeployments: status.deployments.filter((d) => d.pinned && !d.failed && !shown.has(d.id)).map((d) => bootEntry(d, o.hostArchitecture ?? 'amd64')),
      rollbackQueued,
      readOnly: false,
      type: status.booted !== null ? 'bootcHost' : null,
      usrOverlay: null,
    },
  };
}

function bootEntry(d: DeploymentStatus, hostArchitecture: string): BootcBootEntry {
  const o = d.origin;
  const arch = o?.platform?.split('/')[1] ?? hostArchitecture;
  return {
    image: o ? { image: { image: o.ref ?? o.digest, transport: 'oci' }, imageDigest: o.digest, architecture: arch, version: o.labels[VERSION_LABEL] ?? null, timestamp: null } : null,
    cachedUpdate: null,
    incompatible: false,
    pinned: d.pinned,
    downloadOnly: d.locked,
    softRebootCapable: false,
    store: null,
    ostree: null,
    composefs: null,
  };
}
