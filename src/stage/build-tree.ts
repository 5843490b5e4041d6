import type { ChangeOp, ChangeSet } from '../changeset.js';
import type { Context } from '../context.js';
import type { Issue } from '../errors.js';
import { copyTree, type CopyPolicy, type CopyProgress } from '../fs/copy-tree.js';
import { writeJson } from '../fs/durable.js';
import { ManifestWriter } from '../fs/manifest.js';
import { displayPath } from '../fs/names.js';
import { patchManifest } from '../fs/patch-manifest.js';
import { RootFs, type TouchEvent } from '../fs/root-fs.js';
import { labelTouched } from '../fs/selinux.js';
import { applyChanges, type ApplyProgress } from './apply-changes.js';

export interface BuildTreeOptions {
  /** The private work dir: the tree goes to `work/tree`, its manifest and delta beside it. */
  work: string;
  /** The tree to start from (omitted: an empty tree), with its manifest when it has one. */
  from?: { tree: string; manifest?: string; entries?: number | null; policy: CopyPolicy };
  changes?: ChangeSet;
  onCopy?: (p: CopyProgress) => void;
  onApply?: (p: ApplyProgress) => void;
  /** Called once the tree exists (a later failure then has a tree to keep for diagnosis). */
  onTreeBuilt?: () => void;
  /** Takes the change set's ops under shared directories (see SharedDivert). */
  divert?: (op: ChangeOp, root: RootFs) => Promise<number | null>;
  /** Called after the change set, with the tree (writes recorded in the manifest): shared mount points settled. */
  settle?: (root: RootFs) => void;
  /** Called as each step starts (a failure after it belongs to that step). */
  onStep?: (step: 'copy' | 'apply' | 'manifest') => void;
}

export interface BuiltTree {
  tree: string;
  manifest: string;
  delta: string[];
  entries: number;
  bytes: number;
  /** What the change set's source warned about (accepted, but worth saying). */
  warnings: Issue[];
}

/**
 * Builds a deployment's tree in its work dir: copy the base tree (writing its manifest on
 * the way), apply the change set through the safe-fs layer, patch the manifest with what
 * changed and record the delta finalize re-checks. Shared by init and stage.
 */
export async function buildTree(ctx: Context, o: BuildTreeOptions): Promise<BuiltTree> {
  const { dfs } = ctx;
  const tree = `${o.work}/tree`;
  const pre = `${o.work}/manifest.pre.ndjson`;
  const manifest = `${o.work}/manifest.ndjson`;
  dfs.mkdir(o.work);
  dfs.mkdir(tree);
  let bytes = 0;
  o.onStep?.('copy');
  if (o.from) {
    const sockets: string[] = [];
    const devices: string[] = [];
    const copied = copyTree({
      src: o.from.tree,
      dst: tree,
      policy: o.from.policy,
      srcManifest: o.from.manifest,
      manifestOut: pre,
      faults: ctx.faults,
      total: o.from.entries ?? null,
      onProgress: o.onCopy,
      onSkip: (rel, why) => (why === 'socket' ? sockets : devices).push(rel),
      xattrPolicy: ctx.xattrPolicy,
      onXattrDrop: (rel, name, why) => ctx.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`),
    });
    bytes += copied.bytes;
    // Sockets are runtime objects (their listener is gone); device nodes come from
    // devtmpfs at boot: neither is kept, and the user is told which.
    if (sockets.length > 0) ctx.warn(`skipped ${sockets.length} socket${sockets.length === 1 ? '' : 's'} (runtime objects, not kept): ${sockets.map(displayPath).join(', ')}`);
    if (devices.length > 0) ctx.warn(`skipped ${devices.length} device node${devices.length === 1 ? '' : 's'} (devices come from devtmpfs at boot, not from a tree): ${devices.map(displayPath).join(', ')}`);
  } else {
    new ManifestWriter(pre, ctx.faults).close(false);
  }
  o.onTreeBuilt?.();
  const events: TouchEvent[] = [];
  const warnings: Issue[] = [];
  o.onStep?.('apply');
  const root = new RootFs(tree, {
    faults: ctx.faults,
    durability: 'deferred',
    onTouch: (e) => events.push(e),
    xattrPolicy: ctx.xattrPolicy,
    onXattrDrop: (rel, name, why) => ctx.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`),
  });
  if (o.changes) {
    const applied = await applyChanges(root, o.changes, o.onApply, o.divert);
    bytes += applied.bytes;
    warnings.push(...applied.warnings);
    // What the update wrote is labelled by the new tree's own SELinux policy, if it has one.
    labelTouched(root, events, { policy: ctx.xattrPolicy, onDrop: (rel, name, why) => ctx.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`) });
  }
  o.settle?.(root);
  ensureMountPoints(root);
  o.onStep?.('manifest');
  const patched = patchManifest(tree, pre, manifest, events, ctx.faults);
  dfs.unlink(pre);
  writeJson(dfs, `${o.work}/delta.json`, { changed: patched.changed, removed: patched.removed });
  return { tree, manifest, delta: patched.delta, entries: patched.entries, bytes, warnings };
}

/**
 * Where the boot path mounts things in a deployment: the physical root (bound at
 * `sysroot/` by the initramfs step, as ostree does). Created, empty, in every tree that
 * boots (it has an init: `sbin/init` or `usr/sbin/init`), so no one makes them by hand;
 * other trees are left exactly as their source made them.
 */
export const MOUNT_POINTS = ['sysroot'] as const;

function ensureMountPoints(root: RootFs): void {
  const has = (p: string): boolean => {
    try {
      return root.lstat(p) !== null;
    } catch {
      return false;
    }
  };
  if (!has('/sbin/init') && !has('/usr/sbin/init')) return;
  for (const p of MOUNT_POINTS) if (root.lstat(`/${p}`) === null) root.mkdir(`/${p}`, { mode: 0o755 });
}
