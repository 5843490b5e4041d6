/**
 * Writes the boot entries (their text: state/boot-entry-text.ts) in the form the machine's
 * bootloader reads (BLS entries, systemd-boot's files on the ESP, GRUB's stagedroot.cfg),
 * with the kernels they name, and removes the ones no deployment needs any more. The
 * dispatcher: where the boot directory is (boot-dir.ts), then one writer per bootloader
 * (bls.ts, systemd-boot.ts, grub.ts).
 */
import type { Context } from '../../context.js';
import { DurableFs } from '../../fs/trees/durable.js';
import { filesystemPath, type FilesystemPath } from '../../fs/core/mount-path.js';
import { bootableDeployments, bootEntry, carriesSysroot, type KernelImage } from '../../state/boot-entry-text.js';
import { grubMenu } from '../../state/grub-menu.js';
import type { BaseState, DeploymentRecord } from '../../state/schema.js';
import { writeLoaderSwap } from './bls.js';
import { bootDirectory, sysrootOnFilesystem } from './boot-dir.js';
import { writeGrubMenu } from './grub.js';
import { findKernel, KERNEL_PLACES, type Bootable } from './kernels.js';
import { readBootEntriesRecord, recordHolds, STAMP_MARGIN_MS, writeBootEntriesRecord } from './record.js';
import { mountProof, provenFilesystemPath } from './mount-proof.js';
import { SeenPaths } from './seen-paths.js';
import { writeEspEntries } from './systemd-boot.js';

export type BootLoader = 'bls' | 'systemd-boot' | 'grub';

/**
 * The deployments that get an entry, each with its kernel from `find` (looked up, or as a
 * record has it: undefined, not recorded, is null here), and those that ship none.
 */
function bootables(s: BaseState, find: (d: DeploymentRecord) => KernelImage | null | undefined): { list: Bootable[]; none: DeploymentRecord[] } | null {
  const list: Bootable[] = [];
  const none: DeploymentRecord[] = [];
  for (const d of bootableDeployments(s)) {
    const kernel = find(d);
    if (kernel === undefined) return null;
    if (kernel === null) none.push(d);
    else list.push({ deployment: d, kernel });
  }
  return { list, none };
}

/** A deployment without a kernel is named in a warning at every sync, the skipped ones too. */
function warnNoKernel(ctx: Context, none: DeploymentRecord[]): void {
  for (const d of none) ctx.warn(`deployment ${d.id} (${d.label}) ships no kernel (looked for ${KERNEL_PLACES}): it gets no boot entry`);
}

/**
 * `stagedroot=` for the entries: the sysroot's path on its filesystem (mountinfo, read
 * only when needed: GRUB's menu names the trees by it; BLS entries need it only for a
 * deployment whose own arguments do not carry one).
 */
function sysrootArg(ctx: Context, loader: BootLoader, list: Bootable[], mounts: () => FilesystemPath | null): string {
  return loader === 'grub' || !list.every((b) => carriesSysroot(b.deployment)) ? sysrootOnFilesystem(ctx, mounts()) : '';
}

/**
 * What the entries are for, as one string: the sysroot's path (the record's paths are
 * its trees), the form, where, `stagedroot=`, and the text of every entry (both forms'
 * texts: whatever a deployment field changes in either).
 */
function entriesKey(ctx: Context, loader: BootLoader, boot: string, arg: string, list: Bootable[]): string {
  const texts = list.map((b, i) => bootEntry(b.deployment, b.kernel, list.length - i, arg).text);
  return JSON.stringify([ctx.layout.root, loader, boot, arg, texts, loader === 'grub' ? grubMenu(list, arg, arg) : '']);
}

/**
 * Rewrites the bootloader's entries for the state, in the form the machine's bootloader
 * reads (`bootLoader`): every entry names its deployment (`stagedroot.deployment=ID`) and
 * boots it with its own kernel. Called before `current` moves (applyTransition), so a
 * crash at any point leaves entries that each pair a kernel with its own tree.
 * Idempotent: nothing is written when the entries already match. Every `open` calls it
 * (recovery): when the record of the last sync that wrote nothing still holds
 * (record.ts: the same entries wanted, every path it read unchanged), the
 * kernels are not looked up and the entries not read back.
 */
export function syncBootEntries(ctx: Context, s: BaseState): void {
  if (!s.bootDir) return;
  const file = ctx.layout.bootEntriesRecord;
  const { present, record } = readBootEntriesRecord(file);
  // mountinfo read once at most, and not while the record proves its answer.
  let fp: FilesystemPath | null | undefined = record?.mounts ? (provenFilesystemPath(record.mounts, ctx.layout.root) ?? undefined) : undefined;
  const mounts = (): FilesystemPath | null => (fp === undefined ? (fp = filesystemPath(ctx.layout.root)) : fp);
  let boot = bootDirectory(ctx, s, mounts);
  if (boot === null) return;
  const loader: BootLoader = s.bootLoader ?? 'bls';
  if (record !== null) {
    const recorded = bootables(s, (d) => record.kernels[d.id]);
    const holds = recorded !== null && recordHolds(record, entriesKey(ctx, loader, boot, sysrootArg(ctx, loader, recorded.list, mounts), recorded.list), ctx.now().getTime(), ctx.layout.root);
    if (holds) return warnNoKernel(ctx, recorded.none);
  }
  // The disk is read again, and may be written: no record from here until this sync has written nothing.
  if (present) ctx.dfs.unlinkDurably(file);
  if (fp !== undefined) {
    fp = undefined; // what the record proved: read again with the rest
    boot = bootDirectory(ctx, s, mounts)!;
  }
  const at = ctx.now().getTime();
  const seen = new SeenPaths();
  let wrote = false;
  const counted: Context = { ...ctx, dfs: new DurableFs({ afterMutation: (op, p) => ((wrote = true), ctx.faults.afterMutation(op, p)) }) };
  const kernels: Record<string, KernelImage | null> = {};
  const { list, none } = bootables(s, (d) => (kernels[d.id] = findKernel(ctx.layout.tree(d.id), { file: ctx.layout.kernelHashes(d.id), dfs: counted.dfs, manifest: ctx.layout.manifest(d.id) }, seen)))!;
  warnNoKernel(ctx, none);
  const arg = sysrootArg(ctx, loader, list, mounts);
  if (loader === 'grub') writeGrubMenu(counted, boot, list, arg, seen);
  else if (loader === 'systemd-boot') writeEspEntries(counted, boot, list, arg, seen);
  else writeLoaderSwap(counted, boot, list, arg, seen);
  if (!wrote && seen.stable) writeBootEntriesRecord(ctx.dfs, file, { v: 1, at, want: entriesKey(ctx, loader, boot, arg, list), kernels, seen: seen.entries(ctx.layout.root), mounts: fp ? mountProof(ctx.layout.root, fp, at - STAMP_MARGIN_MS) : null }, seen.newestCtimeMs);
}
