import * as path from 'node:path';
import { randomSuffix } from '../util/random.js';

/**
 * Where things live in a sysroot:
 *
 *   state.json, state.json.bak   the state (and the last good copy of it)
 *   current -> deploy/ID/tree    the pointer the next boot follows
 *   boot-tries/ID, fallback, rollback   what the initramfs reads (tries left, where to go when they run out or a tree is broken)
 *   deploy/ID/tree               a deployment's root tree
 *   deploy/ID/manifest.ndjson    its manifest;  deploy/ID/delta.json: paths its update changed
 *   work/ID/                     a stage in progress (removed by recovery after a crash)
 *   trash/                       deployments being removed
 *   lock/                        the writer lock
 *   shared/REL                   a shared directory (shared/var): machine state, in no deployment
 *   shared.list                  the shared directories, one tree-relative path a line (for the initramfs)
 *   kept/ID/PATH                 local versions the merge into deployment ID kept aside (removed with ID)
 *   deploy/ID/shared/REL/...     an update's entries under shared directories, applied at finalize
 *   deploy/ID/shared-ops.json    what to do with them (see src/persistent-dirs/ops.ts)
 *   deploy/ID/merging.json       a merge into ID in progress (recovery redoes it)
 *   deploy/ID/kernel-hashes.json its kernel's and initramfs's sha256 with their inode, size, mtime, ctime (a cache: with --boot-dir)
 *   boot-entries.json            what the last boot-entry sync that wrote nothing read, by identity (boot/entries/record.ts; with --boot-dir)
 *   trusted-keys/KEYID.pub       public keys a source's signature must match (none: unsigned sources are fine)
 *   hooks/PHASE/                 executables run at each phase, in name order
 *   live-apply/                  a live apply in progress: journal.json and before/N (src/activation/live/journal.ts)
 *   hook-runs/PHASE.json         what the last run of each phase's hooks did (bounded output)
 *   layers/                      the layer store: every image layer staged, unpacked once (src/layer-store/store.ts)
 *   .stagedroot-tmp-PID-HEX      an entry being replaced (fs/trees/write-via-temp.ts; in any directory stagedroot writes)
 */
export class Layout {
  readonly root: string;
  constructor(sysroot: string) {
    this.root = path.resolve(sysroot);
  }
  get stateFile(): string {
    return path.join(this.root, 'state.json');
  }
  get stateBackup(): string {
    return path.join(this.root, 'state.json.bak');
  }
  get currentLink(): string {
    return path.join(this.root, 'current');
  }
  get deployDir(): string {
    return path.join(this.root, 'deploy');
  }
  get workDir(): string {
    return path.join(this.root, 'work');
  }
  get trashDir(): string {
    return path.join(this.root, 'trash');
  }
  get bootTriesDir(): string {
    return path.join(this.root, 'boot-tries');
  }
  bootTriesFile(id: string): string {
    return path.join(this.bootTriesDir, id);
  }
  get fallbackLink(): string {
    return path.join(this.root, 'fallback');
  }
  get rollbackLink(): string {
    return path.join(this.root, 'rollback');
  }
  get trustedKeysDir(): string {
    return path.join(this.root, 'trusted-keys');
  }
  get hooksDir(): string {
    return path.join(this.root, 'hooks');
  }
  get hookRunsDir(): string {
    return path.join(this.root, 'hook-runs');
  }
  deployment(id: string): string {
    return path.join(this.deployDir, id);
  }
  tree(id: string): string {
    return path.join(this.deployDir, id, 'tree');
  }
  manifest(id: string): string {
    return path.join(this.deployDir, id, 'manifest.ndjson');
  }
  delta(id: string): string {
    return path.join(this.deployDir, id, 'delta.json');
  }
  kernelHashes(id: string): string {
    return path.join(this.deployDir, id, 'kernel-hashes.json');
  }
  get bootEntriesRecord(): string {
    return path.join(this.root, 'boot-entries.json');
  }
  get sharedRoot(): string {
    return path.join(this.root, 'shared');
  }
  /** Host path of a shared directory (its tree-relative path, e.g. "var"). */
  shared(rel: string): string {
    return path.join(this.root, 'shared', rel);
  }
  get sharedList(): string {
    return path.join(this.root, 'shared.list');
  }
  /** The layer store, shared by every deployment staged from an image. */
  get layersDir(): string {
    return path.join(this.root, 'layers');
  }
  get keptRoot(): string {
    return path.join(this.root, 'kept');
  }
  /** Where the merge into deployment `id` keeps local versions (`.partial` until the swap). */
  kept(id: string, partial = false): string {
    return path.join(this.root, 'kept', partial ? `${id}.partial` : id);
  }
  /** An update's entries under shared directories, staged beside its tree. */
  sharedContent(id: string): string {
    return path.join(this.deployDir, id, 'shared');
  }
  sharedOps(id: string): string {
    return path.join(this.deployDir, id, 'shared-ops.json');
  }
  /** The intent journal of a live apply in progress (and its before-images). */
  get liveApply(): string {
    return path.join(this.root, 'live-apply');
  }
  /** The before-images of the live applies into deployment `id`'s tree while it ran, one directory each in order: restored into it once it no longer runs. */
  get liveUndoRoot(): string {
    return path.join(this.root, 'live-undo');
  }
  liveUndo(id: string): string {
    return path.join(this.root, 'live-undo', id);
  }
  mergeMarker(id: string): string {
    return path.join(this.deployDir, id, 'merging.json');
  }
  work(id: string): string {
    return path.join(this.workDir, id);
  }
  /** Where a deployment goes while it is being removed (unique, so a retry never collides). */
  trashEntry(id: string): string {
    return path.join(this.trashDir, `${id}-${randomSuffix()}`);
  }
  /** Where a state.json that cannot be read is moved aside (kept for diagnosis, never read again). */
  brokenStateAside(at: Date): string {
    return `${this.stateFile}.broken-${at.toISOString().replace(/[:.]/g, '-')}`;
  }
  /** The symlink target (relative, so the sysroot can be moved) for a deployment. */
  linkTarget(id: string): string {
    return `deploy/${id}/tree`;
  }
  /** True for a name shaped like a deployment id (what deploy/ and kept/ hold). */
  isDeploymentId(name: string): boolean {
    return /^\d{4,}$/.test(name);
  }
  /** The deployment id a `current` symlink target names, or null. */
  idFromLink(target: string | null): string | null {
    const m = target === null ? null : /^deploy\/(\d{4,})\/tree$/.exec(target);
    return m ? m[1]! : null;
  }
}
