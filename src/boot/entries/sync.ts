/**
 * Writes the boot entries (their text: state/boot-entry-text.ts) in the form the machine's
 * bootloader reads (BLS entries, systemd-boot's files on the ESP, GRUB's stagedroot.cfg),
 * with the kernels they name, and removes the ones no deployment needs any more.
 */
import * as path from 'node:path';
import type { Context } from '../../context.js';
import { DurableFs } from '../../fs/trees/durable.js';
import { readLink, statPath } from '../../fs/core/host-paths.js';
import { filesystemPath, pathHere, type FilesystemPath } from '../../fs/core/mount-path.js';
import { bootableDeployments, bootEntry, carriesSysroot, parseBootEntry, type BootEntry, type KernelImage } from '../../state/boot-entry-text.js';
import { GRUB_MENU_FILE, grubMenu } from '../../state/grub-menu.js';
import { LOADER_CONF, loaderConfWithDefault } from '../../state/loader-conf.js';
import type { BaseState, DeploymentRecord } from '../../state/schema.js';
import { findKernel, installKernel, KERNEL_PLACES, removeUnusedKernels } from './kernels.js';
import { readBootEntriesRecord, recordHolds, STAMP_MARGIN_MS, writeBootEntriesRecord } from './record.js';
import { mountProof, provenFilesystemPath } from './mount-proof.js';
import { SeenPaths } from './seen-paths.js';

export type BootLoader = 'bls' | 'systemd-boot' | 'grub';

interface Bootable {
  deployment: DeploymentRecord;
  kernel: KernelImage;
}

/**
 * The sysroot's path on its filesystem (what `stagedroot=` names and GRUB reads), the
 * same before the first boot under stagedroot (`/stagedroot`) and after it
 * (`/sysroot/stagedroot`).
 */
export function sysrootOnFilesystem(ctx: Context, fp: FilesystemPath | null = filesystemPath(ctx.layout.root)): string {
  return fp?.onFilesystem ?? ctx.layout.root;
}

/**
 * Where the boot directory is now. One on the sysroot's own filesystem (a GRUB
 * directory under the physical root's /boot) is found from the sysroot's path, as the
 * sysroot itself is found (`/stagedroot` before the first boot under stagedroot,
 * `/sysroot/stagedroot` from the initramfs's record after it): `../boot/grub` is
 * `/boot/grub`, then `/sysroot/boot/grub` (the booted tree's own /boot is a copy nothing
 * reads). States written before that resolve through the filesystem's mount, or use the
 * absolute path they recorded.
 */
export function bootDirectory(ctx: Context, s: BaseState, mounts: () => FilesystemPath | null = () => filesystemPath(ctx.layout.root)): string | null {
  if (!s.bootDir) return null;
  if (s.bootDirFromSysroot !== undefined) return path.resolve(ctx.layout.root, s.bootDirFromSysroot);
  if (s.bootDirOnSysrootFs) {
    const fp = mounts();
    const here = fp && pathHere(fp, s.bootDirOnSysrootFs);
    if (here) return here;
  }
  return s.bootDir;
}

/**
 * The state's record of a boot directory: its absolute path as given, and, when it is on
 * the sysroot's filesystem, its path relative to the sysroot (see bootDirectory). The
 * relation is taken from both paths on that filesystem (symlinks and bind mounts
 * resolved) and must lead back to the same directory from the sysroot's path as given.
 */
export function bootDirRecord(root: string, bootDir: string): Pick<BaseState, 'bootDir' | 'bootDirFromSysroot'> {
  const sysrootFs = filesystemPath(root);
  const bootFs = filesystemPath(bootDir);
  if (sysrootFs === null || bootFs === null || sysrootFs.dev !== bootFs.dev) return { bootDir };
  const rel = path.posix.relative(sysrootFs.onFilesystem, bootFs.onFilesystem) || '.';
  const a = statPath(path.resolve(root, rel));
  const b = statPath(bootDir);
  if (a === null || b === null || a.dev !== b.dev || a.ino !== b.ino) return { bootDir };
  return { bootDir, bootDirFromSysroot: rel };
}

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
  const { list, none } = bootables(s, (d) => (kernels[d.id] = findKernel(ctx.layout.tree(d.id), { file: ctx.layout.kernelHashes(d.id), dfs: counted.dfs }, seen)))!;
  warnNoKernel(ctx, none);
  const arg = sysrootArg(ctx, loader, list, mounts);
  if (loader === 'grub') writeGrubMenu(counted, boot, list, arg, seen);
  else if (loader === 'systemd-boot') writeEspEntries(counted, boot, list, arg, seen);
  else writeLoaderSwap(counted, boot, list, arg, seen);
  if (!wrote && seen.stable) writeBootEntriesRecord(ctx.dfs, file, { v: 1, at, want: entriesKey(ctx, loader, boot, arg, list), kernels, seen: seen.entries(ctx.layout.root), mounts: fp ? mountProof(ctx.layout.root, fp, at - STAMP_MARGIN_MS) : null }, seen.newestCtimeMs);
}

/**
 * BLS entries swapped as ostree swaps them (GRUB with blscfg): kernels copied in by
 * checksum first, the whole new set written into the `loader.N` that `loader` does not
 * point at, then one rename of the `loader` symlink commits it. A crash leaves the old
 * set or the new one, never a mix.
 */
function writeLoaderSwap(ctx: Context, boot: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const { dfs } = ctx;
  const entries = list.map((b, i) => bootEntry(b.deployment, b.kernel, list.length - i, arg));
  seen.lstat(path.join(boot, 'loader'));
  const active = readLink(path.join(boot, 'loader'));
  const activeDir = active === null ? null : path.join(boot, active, 'entries');
  const same = activeDir !== null && (seen.stat(activeDir)?.isDirectory() ?? false) && sameEntries(activeDir, entries, seen);
  if (!same) {
    for (const b of list) installKernel(ctx, boot, ctx.layout.tree(b.deployment.id), b.kernel);
    const next = active === 'loader.1' ? 'loader.0' : 'loader.1';
    const nextDir = path.join(boot, next);
    dfs.removeTree(nextDir);
    dfs.mkdir(nextDir);
    dfs.mkdir(path.join(nextDir, 'entries'));
    for (const e of entries) dfs.writeFileAtomic(path.join(nextDir, 'entries', e.file), e.text);
    dfs.replaceSymlink(path.join(boot, 'loader'), next);
  }
  // The temp name of a swap a crash interrupted (an older version's: .loader.new-…); the
  // inactive set is rewritten whole by the next swap.
  seen.stat(boot);
  dfs.removeTempLeftovers(boot, (t) => t === 'loader');
  removeUnusedKernels(ctx, boot, new Set(list.map((b) => b.kernel.hash)), seen);
}

function sameEntries(dir: string, entries: BootEntry[], seen: SeenPaths): boolean {
  const names = seen.list(dir).sort();
  if (names.join('\n') !== entries.map((e) => e.file).sort().join('\n')) return false;
  return entries.every((e) => seen.read(path.join(dir, e.file)) === e.text);
}

const ESP_ENTRY = /^stagedroot-(\d{4,})\.conf$/;

/**
 * systemd-boot on an ESP (FAT: no symlinks): plain files in loader/entries/, each
 * written and renamed on its own, so there is no set to swap. Versions only grow: the
 * entries are written lowest first, each with a version above every one on disk, so at
 * every point the highest (systemd-boot's default among them: loader.conf says
 * `default stagedroot-*`, state/loader-conf.ts) is the old default or the new one, and
 * every file on disk names a deployment that has its kernel in place. Entries no longer
 * wanted go last, then their kernels.
 */
function writeEspEntries(ctx: Context, esp: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const { dfs } = ctx;
  const dir = path.join(esp, 'loader', 'entries');
  const onDisk = seen
    .list(dir)
    .filter((f) => ESP_ENTRY.test(f))
    .map((f) => {
      const text = seen.read(path.join(dir, f)) ?? '';
      return { file: f, text, version: Number(parseBootEntry(text).version ?? 0) || 0 };
    })
    .sort((a, b) => b.version - a.version);
  const top = onDisk[0]?.version ?? 0;
  const withVersions = (base: number): BootEntry[] => list.map((b, i) => bootEntry(b.deployment, b.kernel, base + list.length - 1 - i, arg));
  // Up to date: the same files, in the same order, with the same text but for their versions.
  const unversioned = (t: string): string => t.replace(/^version .*$/m, '');
  const want = withVersions(0);
  const same = want.length === onDisk.length && want.every((e, i) => onDisk[i]!.file === e.file && unversioned(onDisk[i]!.text) === unversioned(e.text));
  if (!same) {
    dfs.mkdir(path.join(esp, 'loader'));
    dfs.mkdir(dir);
    for (const b of list) installKernel(ctx, esp, ctx.layout.tree(b.deployment.id), b.kernel);
    const entries = withVersions(top + 1);
    for (const e of [...entries].reverse()) dfs.writeFileAtomic(path.join(dir, e.file), e.text);
    const keep = new Set(entries.map((e) => e.file));
    for (const e of onDisk) if (!keep.has(e.file)) dfs.unlink(path.join(dir, e.file));
  }
  // Then the default: stagedroot's entries, not the distribution's (sorted first by their
  // sort-key). Written after the entries it selects; a crash before it leaves the
  // machine's own default, as before the adoption.
  const conf = path.join(esp, LOADER_CONF);
  if (list.length > 0) {
    const text = seen.read(conf);
    const wanted = loaderConfWithDefault(text);
    if (text !== wanted) dfs.writeFileAtomic(conf, wanted);
  }
  // Temp files of a write a crash interrupted (systemd-boot reads only *.conf; an older version named them .stagedroot-ID.conf.tmp-…).
  seen.stat(dir);
  dfs.removeTempLeftovers(dir, (t) => ESP_ENTRY.test(t));
  if (seen.stat(path.dirname(conf))?.isDirectory()) dfs.removeTempLeftovers(path.dirname(conf));
  removeUnusedKernels(ctx, esp, new Set(list.map((b) => b.kernel.hash)), seen);
}

/**
 * GRUB without blscfg: stagedroot's own menu file beside grub.cfg, one atomic write
 * (temp + fsync + rename + fsync of the directory on the boot filesystem); grub.cfg
 * itself is never rewritten here. The kernels are read from the deployments' trees.
 */
function writeGrubMenu(ctx: Context, grubDir: string, list: Bootable[], arg: string, seen: SeenPaths): void {
  const text = grubMenu(list, arg, arg);
  const file = path.join(grubDir, GRUB_MENU_FILE);
  if (seen.read(file) !== text) ctx.dfs.writeFileAtomic(file, text);
  seen.stat(grubDir);
  ctx.dfs.removeTempLeftovers(grubDir, (t) => t === GRUB_MENU_FILE);
}
