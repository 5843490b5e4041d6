import { createHash } from 'node:crypto';
import * as path from 'node:path';
import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { exists, isDirectory, listDir, readBytes, readLink, readText } from '../fs/trees/durable.js';
import { hashFile } from '../fs/core/hash.js';
import { bootEntry, bootableDeployments, kernelDir, type BootEntry, type KernelImage } from '../state/boot-entries.js';
import type { BaseState } from '../state/schema.js';

const MAX_IMAGE = 512 << 20;

/** The kernel a deployment ships (usr/lib/modules/VERSION/vmlinuz, initramfs.img beside it), the highest version; null when none. */
export function findKernel(tree: string): (KernelImage & { kernel: string; initrd: string | null }) | null {
  const modules = path.join(tree, 'usr/lib/modules');
  const versions = listDir(modules)
    .filter((v) => exists(path.join(modules, v, 'vmlinuz')))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const version = versions.at(-1);
  if (version === undefined) return null;
  const kernel = path.join(modules, version, 'vmlinuz');
  const initrdPath = path.join(modules, version, 'initramfs.img');
  const initrd = exists(initrdPath) ? initrdPath : null;
  const hash = createHash('sha256').update(hashFile(kernel)).update(initrd ? hashFile(initrd) : '').digest('hex');
  return { version, hash, hasInitrd: initrd !== null, kernel, initrd };
}

function copyImage(ctx: Context, from: string, to: string): void {
  const data = readBytes(from, MAX_IMAGE);
  if (data === null) throw new StagedrootError('IO', `${from} is larger than ${MAX_IMAGE} bytes or unreadable`, { path: from });
  ctx.dfs.writeFileAtomic(to, data);
}

/**
 * Rewrites the boot directory's entries for the state, as ostree swaps them: kernels are
 * copied in by checksum first (a directory renamed into place once complete), the whole
 * new set of entries is written into the `loader.N` that `loader` does not point at, each
 * file synced, then one rename of the `loader` symlink commits it. A crash leaves the old
 * set or the new one, never a mix; a later call (recovery) finishes the job. Idempotent:
 * nothing is written when the entries already match.
 */
export function syncBootEntries(ctx: Context, s: BaseState): void {
  const boot = s.bootDir;
  if (!boot) return;
  const { dfs } = ctx;
  const entries: BootEntry[] = [];
  const kernels = new Map<string, ReturnType<typeof findKernel>>();
  bootableDeployments(s).forEach((d, i, all) => {
    const k = findKernel(ctx.layout.tree(d.id));
    if (k === null) return;
    kernels.set(k.hash, k);
    entries.push(bootEntry(d, k, all.length - i));
  });
  const active = readLink(path.join(boot, 'loader'));
  const activeDir = active === null ? null : path.join(boot, active, 'entries');
  const same = activeDir !== null && isDirectory(activeDir) && sameEntries(activeDir, entries);
  if (!same) {
    for (const k of kernels.values()) installKernel(ctx, boot, k!);
    const next = active === 'loader.1' ? 'loader.0' : 'loader.1';
    const nextDir = path.join(boot, next);
    dfs.removeTree(nextDir);
    dfs.mkdir(nextDir);
    dfs.mkdir(path.join(nextDir, 'entries'));
    for (const e of entries) dfs.writeFileAtomic(path.join(nextDir, 'entries', e.file), e.text);
    dfs.replaceSymlink(path.join(boot, 'loader'), next);
  }
  // Kernels no entry uses any more.
  const kept = new Set([...kernels.keys()]);
  for (const h of listDir(path.join(boot, 'stagedroot'))) if (!kept.has(h)) dfs.removeTree(path.join(boot, 'stagedroot', h));
}

function sameEntries(dir: string, entries: BootEntry[]): boolean {
  const names = listDir(dir).sort();
  if (names.join('\n') !== entries.map((e) => e.file).sort().join('\n')) return false;
  return entries.every((e) => readText(path.join(dir, e.file)) === e.text);
}

function installKernel(ctx: Context, boot: string, k: KernelImage & { kernel: string; initrd: string | null }): void {
  const { dfs } = ctx;
  const dir = path.join(boot, kernelDir(k));
  if (isDirectory(dir)) return;
  dfs.mkdir(path.join(boot, 'stagedroot'));
  const tmp = `${dir}.tmp`;
  dfs.removeTree(tmp);
  dfs.mkdir(tmp);
  copyImage(ctx, k.kernel, path.join(tmp, `vmlinuz-${k.version}`));
  if (k.initrd) copyImage(ctx, k.initrd, path.join(tmp, `initramfs-${k.version}.img`));
  dfs.rename(tmp, dir);
}
