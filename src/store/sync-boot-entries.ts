/**
 * Writes the boot entries (their text: state/boot-entry-text.ts) in the form the machine's
 * bootloader reads (BLS entries, systemd-boot's files on the ESP, GRUB's stagedroot.cfg),
 * with the kernels they name, and removes the ones no deployment needs any more.
 */
import * as path from 'node:path';
import type { Context } from '../context.js';
import { isDirectory, listDir, readLink, readText, statPath } from '../fs/trees/durable.js';
import { filesystemPath, pathHere, type FilesystemPath } from '../fs/core/mount-path.js';
import { bootableDeployments, bootEntry, parseBootEntry, type BootEntry, type KernelImage } from '../state/boot-entry-text.js';
import { GRUB_MENU_FILE, grubMenu } from '../state/grub-menu.js';
import { LOADER_CONF, loaderConfWithDefault } from '../state/loader-conf.js';
import type { BaseState, DeploymentRecord } from '../state/schema.js';
import { findKernel, installKernel, KERNEL_PLACES, removeUnusedKernels } from './kernels.js';

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
export function bootDirectory(ctx: Context, s: BaseState, fp: FilesystemPath | null = s.bootDirOnSysrootFs ? filesystemPath(ctx.layout.root) : null): string | null {
  if (!s.bootDir) return null;
  if (s.bootDirFromSysroot !== undefined) return path.resolve(ctx.layout.root, s.bootDirFromSysroot);
  if (s.bootDirOnSysrootFs) {
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

/** The deployments that get an entry, each with its kernel; one without a kernel is named in a warning. */
function bootables(ctx: Context, s: BaseState): Bootable[] {
  const out: Bootable[] = [];
  for (const d of bootableDeployments(s)) {
    const kernel = findKernel(ctx.layout.tree(d.id), { file: ctx.layout.kernelHashes(d.id), dfs: ctx.dfs });
    if (kernel === null) {
      ctx.warn(`deployment ${d.id} (${d.label}) ships no kernel (looked for ${KERNEL_PLACES}): it gets no boot entry`);
      continue;
    }
    out.push({ deployment: d, kernel });
  }
  return out;
}

/**
 * Rewrites the bootloader's entries for the state, in the form the machine's bootloader
 * reads (`bootLoader`): every entry names its deployment (`stagedroot.deployment=ID`) and
 * boots it with its own kernel. Called before `current` moves (applyTransition), so a
 * crash at any point leaves entries that each pair a kernel with its own tree.
 * Idempotent: nothing is written when the entries already match.
 */
export function syncBootEntries(ctx: Context, s: BaseState): void {
  if (!s.bootDir) return;
  const fp = filesystemPath(ctx.layout.root); // mountinfo read once for both
  const boot = bootDirectory(ctx, s, fp);
  if (boot === null) return;
  const loader: BootLoader = s.bootLoader ?? 'bls';
  const list = bootables(ctx, s);
  const arg = sysrootOnFilesystem(ctx, fp);
  if (loader === 'grub') writeGrubMenu(ctx, boot, list, arg);
  else if (loader === 'systemd-boot') writeEspEntries(ctx, boot, list, arg);
  else writeLoaderSwap(ctx, boot, list, arg);
}

/**
 * BLS entries swapped as ostree swaps them (GRUB with blscfg): kernels copied in by
 * checksum first, the whole new set written into the `loader.N` that `loader` does not
 * point at, then one rename of the `loader` symlink commits it. A crash leaves the old
 * set or the new one, never a mix.
 */
function writeLoaderSwap(ctx: Context, boot: string, list: Bootable[], arg: string): void {
  const { dfs } = ctx;
  const entries = list.map((b, i) => bootEntry(b.deployment, b.kernel, list.length - i, arg));
  const active = readLink(path.join(boot, 'loader'));
  const activeDir = active === null ? null : path.join(boot, active, 'entries');
  const same = activeDir !== null && isDirectory(activeDir) && sameEntries(activeDir, entries);
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
  dfs.removeTempLeftovers(boot, (t) => t === 'loader');
  removeUnusedKernels(ctx, boot, new Set(list.map((b) => b.kernel.hash)));
}

function sameEntries(dir: string, entries: BootEntry[]): boolean {
  const names = listDir(dir).sort();
  if (names.join('\n') !== entries.map((e) => e.file).sort().join('\n')) return false;
  return entries.every((e) => readText(path.join(dir, e.file)) === e.text);
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
function writeEspEntries(ctx: Context, esp: string, list: Bootable[], arg: string): void {
  const { dfs } = ctx;
  const dir = path.join(esp, 'loader', 'entries');
  const onDisk = listDir(dir)
    .filter((f) => ESP_ENTRY.test(f))
    .map((f) => {
      const text = readText(path.join(dir, f)) ?? '';
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
    const text = readText(conf);
    const wanted = loaderConfWithDefault(text);
    if (text !== wanted) dfs.writeFileAtomic(conf, wanted);
  }
  // Temp files of a write a crash interrupted (systemd-boot reads only *.conf; an older version named them .stagedroot-ID.conf.tmp-…).
  dfs.removeTempLeftovers(dir, (t) => ESP_ENTRY.test(t));
  if (isDirectory(path.dirname(conf))) dfs.removeTempLeftovers(path.dirname(conf));
  removeUnusedKernels(ctx, esp, new Set(list.map((b) => b.kernel.hash)));
}

/**
 * GRUB without blscfg: stagedroot's own menu file beside grub.cfg, one atomic write
 * (temp + fsync + rename + fsync of the directory on the boot filesystem); grub.cfg
 * itself is never rewritten here. The kernels are read from the deployments' trees.
 */
function writeGrubMenu(ctx: Context, grubDir: string, list: Bootable[], arg: string): void {
  const text = grubMenu(list, arg, arg);
  const file = path.join(grubDir, GRUB_MENU_FILE);
  if (readText(file) !== text) ctx.dfs.writeFileAtomic(file, text);
  ctx.dfs.removeTempLeftovers(grubDir, (t) => t === GRUB_MENU_FILE);
}
