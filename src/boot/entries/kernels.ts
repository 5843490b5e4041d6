import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { z } from 'zod';
import type { Context } from '../../context.js';
import { StagedrootError } from '../../errors.js';
import { writeJson, type DurableFs } from '../../fs/trees/durable.js';
import { isDirectory, readBytes, readLink, readText, statPath } from '../../fs/core/host-paths.js';
import { hashFile } from '../../fs/core/hash.js';
import { ctimeUs } from '../../fs/manifests/manifest-line.js';
import { unchangedSince } from '../../fs/manifests/manifest.js';
import { ManifestIndex } from '../../fs/manifests/manifest-index.js';
import { copiedNames, kernelDir, type KernelImage } from '../../state/boot-entry-text.js';
import type { DeploymentRecord } from '../../state/schema.js';
import { parseJsonState } from '../../util/json-state.js';
import { compareVersions } from '../../util/version-compare.js';
import { SeenPaths } from './seen-paths.js';

/** A deployment that gets a boot entry, with the kernel it boots. */
export interface Bootable {
  deployment: DeploymentRecord;
  kernel: KernelImage;
}

const MAX_IMAGE = 512 << 20;

/** Where kernels are looked for, in words (for the warning when none is found). */
export const KERNEL_PLACES = 'usr/lib/modules/VERSION/vmlinuz, boot/vmlinuz-VERSION';

/**
 * A regular file inside the tree reached through real directories, no symlink on the way
 * (a tree's link must not lead to a host file). `dirs` remembers the directories one
 * lookup of candidates() has checked already (usr/lib/modules/V is on the way to both
 * vmlinuz and initramfs.img). Every path looked at is recorded in `seen` (a boot-entry
 * sync's record: record.ts).
 */
function isFileInTree(tree: string, rel: string, dirs: Map<string, boolean>, seen: SeenPaths): boolean {
  const parts = rel.split('/');
  for (let i = 1; i < parts.length; i++) {
    const dir = parts.slice(0, i).join('/');
    let ok = dirs.get(dir);
    if (ok === undefined) dirs.set(dir, (ok = seen.lstat(path.join(tree, dir))?.isDirectory() ?? false));
    if (!ok) return false;
  }
  return seen.lstat(path.join(tree, rel))?.isFile() ?? false;
}

/** Candidates, both layouts: usr/lib/modules/V/vmlinuz (+ initramfs.img), Debian's boot/vmlinuz-V (+ boot/initrd.img-V). */
function candidates(tree: string, seen: SeenPaths): { version: string; kernelPath: string; initrdPath: string | null }[] {
  const out: { version: string; kernelPath: string; initrdPath: string | null }[] = [];
  const dirs = new Map<string, boolean>();
  for (const v of seen.list(path.join(tree, 'usr/lib/modules'))) {
    const kernelPath = `usr/lib/modules/${v}/vmlinuz`;
    if (!isFileInTree(tree, kernelPath, dirs, seen)) continue;
    const initrd = `usr/lib/modules/${v}/initramfs.img`;
    out.push({ version: v, kernelPath, initrdPath: isFileInTree(tree, initrd, dirs, seen) ? initrd : null });
  }
  for (const name of seen.list(path.join(tree, 'boot'))) {
    const m = /^vmlinuz-(.+)$/.exec(name);
    if (!m || out.some((c) => c.version === m[1])) continue;
    const kernelPath = `boot/${name}`;
    if (!isFileInTree(tree, kernelPath, dirs, seen)) continue;
    const initrd = `boot/initrd.img-${m[1]}`;
    out.push({ version: m[1]!, kernelPath, initrdPath: isFileInTree(tree, initrd, dirs, seen) ? initrd : null });
  }
  return out;
}

/**
 * The version Debian's default-kernel link names: linux-base keeps `/vmlinuz` (or
 * `/boot/vmlinuz`, with link_in_boot) pointing at the kernel installed last, the one the
 * distribution boots by default (update-grub's first entry). Null without such a link.
 */
function linkedVersion(tree: string, seen: SeenPaths): string | null {
  for (const rel of ['vmlinuz', 'boot/vmlinuz']) {
    // readLink reads the link itself (never follows it) and is null for what is not one.
    seen.lstat(path.join(tree, rel));
    const m = /(?:^|\/)vmlinuz-([^/]+)$/.exec(readLink(path.join(tree, rel)) ?? '');
    if (m) return m[1]!;
  }
  return null;
}

/** Where a deployment's kernel hashes are kept (deploy/ID/kernel-hashes.json), and who writes it. */
export interface KernelHashCache {
  file: string;
  dfs: DurableFs;
  /** The deployment's manifest: an image it recorded from this very inode, unchanged since, has its hash there. */
  manifest?: string;
}

/** Each image's hash, with what identifies the inode it was read from. */
const cacheSchema = z.array(z.object({ rel: z.string(), ino: z.number(), size: z.number(), mtimeMs: z.number(), ctimeUs: z.number(), sha256: z.string() }));
type CachedHash = z.output<typeof cacheSchema>[number];

/** The cache as recorded, read like every JSON state file (parseJsonState); none, torn or foreign: empty (every image is hashed again). */
function readCache(file: string): CachedHash[] {
  const text = readText(file);
  if (text === null) return [];
  try {
    return parseJsonState(text, file, cacheSchema, 'kernel hash cache');
  } catch {
    return [];
  }
}

/**
 * The sha256 of each image, from the cache when its inode, size, mtime and ctime are the
 * ones the cache recorded (any content, mode or owner change moves the ctime, which no
 * user sets), else read whole; the cache is rewritten when an image was read.
 */
function imageHashes(tree: string, rels: string[], cache: KernelHashCache | undefined, seen: SeenPaths): string[] {
  const known = cache === undefined ? [] : readCache(cache.file);
  let read = false;
  const now: CachedHash[] = rels.map((rel) => {
    const host = path.join(tree, rel);
    const st = seen.lstat(host);
    const c = known.find((k) => k.rel === rel);
    if (st !== null && c !== undefined && c.ino === st.ino && c.size === st.size && c.mtimeMs === st.mtimeMs && c.ctimeUs === ctimeUs(st)) return c;
    read = true;
    const sha256 = (st !== null ? manifestHash(cache?.manifest, rel, st) : null) ?? hashFile(host);
    // Recorded with the stat taken before the read: a write during the read moves the ctime, so the next call reads again.
    return { rel, ino: st?.ino ?? -1, size: st?.size ?? -1, mtimeMs: st?.mtimeMs ?? -1, ctimeUs: st === null ? -1 : ctimeUs(st), sha256 };
  });
  if (read && cache !== undefined) writeJson(cache.dfs, cache.file, now);
  return now.map((c) => c.sha256);
}

/**
 * The sha256 the deployment's manifest recorded for `rel` when it recorded this very inode,
 * unchanged since (inode, size, mtime and ctime: unchangedSince, the proof the /etc merge
 * trusts), so that the first sync of a new deployment does not read its images whole (tens
 * of MB; a stage copies boot/ and records them); null otherwise, or without a manifest.
 */
function manifestHash(manifest: string | undefined, rel: string, st: NonNullable<ReturnType<SeenPaths['lstat']>>): string | null {
  if (manifest === undefined || !st.isFile()) return null;
  let index: ManifestIndex;
  try {
    index = new ManifestIndex(manifest);
  } catch {
    return null; // none (a tree being built) or unreadable: the image is read
  }
  try {
    const e = index.find(rel);
    return unchangedSince(e, st) ? e!.h! : null;
  } finally {
    index.close();
  }
}

/**
 * The kernel a deployment ships, where its distribution keeps it: usr/lib/modules/V/vmlinuz
 * (initramfs.img beside it) and Debian's boot/vmlinuz-V (boot/initrd.img-V); the one
 * Debian's `/vmlinuz` link names, else the highest version (two flavours of one version,
 * `-amd64` beside `-cloud-amd64`, have no order but the link's). Null when the tree has none. With `cache`, the images (tens of MB)
 * are read only when they changed since the cache recorded them: a transition with a boot
 * directory, and an `open` whose record of the last sync no longer holds, ask for each
 * deployment's kernel. With `seen`, each path the lookup looked at is recorded with its
 * identity (what the answer depends on).
 */
export function findKernel(tree: string, cache?: KernelHashCache, seen = new SeenPaths()): KernelImage | null {
  const all = candidates(tree, seen).sort((a, b) => compareVersions(a.version, b.version));
  const linked = linkedVersion(tree, seen);
  const k = all.find((c) => c.version === linked) ?? all.at(-1);
  if (k === undefined) return null;
  const [kernel, initrd] = imageHashes(tree, k.initrdPath ? [k.kernelPath, k.initrdPath] : [k.kernelPath], cache, seen);
  const hash = createHash('sha256')
    .update(kernel!)
    .update(initrd ?? '')
    .digest('hex');
  return { ...k, hash };
}

/**
 * Records a new deployment's kernel hashes (deploy/ID/kernel-hashes.json) from its manifest
 * when it is staged, so that the entry sync of the step that makes it current (a finalize,
 * or an apply-live's commit, which the live bench times) finds them in the cache instead of
 * opening the manifest and writing the cache then. A cache: a failure here is left for that
 * sync, which looks again and reports it.
 */
export function recordKernelHashes(ctx: Context, id: string): void {
  try {
    findKernel(ctx.layout.tree(id), { file: ctx.layout.kernelHashes(id), dfs: ctx.dfs, manifest: ctx.layout.manifest(id) });
  } catch {
    // the sync that needs them reads them again
  }
}

function copyImage(ctx: Context, from: string, to: string): void {
  const data = readBytes(from, MAX_IMAGE);
  if (data === null) throw new StagedrootError('IO', `${from} is larger than ${MAX_IMAGE} bytes or unreadable`, { path: from });
  ctx.dfs.writeFileAtomic(to, data);
}

/**
 * Copies a deployment's kernel (and initramfs) into a boot directory under
 * stagedroot/HASH/, as plain files (an ESP is FAT: no symlinks, no hardlinks): a
 * directory filled beside its place and renamed there once complete. Nothing when the
 * copy is there already.
 */
export function installKernel(ctx: Context, boot: string, tree: string, k: KernelImage): void {
  const { dfs } = ctx;
  const dir = path.join(boot, kernelDir(k));
  const names = copiedNames(k);
  if (isDirectory(dir)) {
    if (copiesComplete(dir, tree, k)) return;
    // Emptied by a power cut on FAT under an older stagedroot (see syncRenamedOnFat), or cut short by hand: copied again.
    dfs.removeTree(dir);
  }
  dfs.mkdir(path.join(boot, 'stagedroot'));
  dfs.createViaTemp(dir, (tmp) => {
    dfs.mkdir(tmp);
    copyImage(ctx, path.join(tree, k.kernelPath), path.join(tmp, names.kernel));
    if (k.initrdPath !== null) copyImage(ctx, path.join(tree, k.initrdPath), path.join(tmp, names.initrd!));
  });
}

/** The copy in `dir` has the kernel (and initramfs) at the size they have in the tree (a stat each, not a read: the directory's name is their hash). */
function copiesComplete(dir: string, tree: string, k: KernelImage): boolean {
  const names = copiedNames(k);
  const pairs: [string, string][] = [[k.kernelPath, names.kernel]];
  if (k.initrdPath !== null) pairs.push([k.initrdPath, names.initrd!]);
  return pairs.every(([from, to]) => {
    const a = statPath(path.join(tree, from));
    const b = statPath(path.join(dir, to));
    return a !== null && b !== null && b.isFile() && b.size === a.size;
  });
}

/** Removes the kernel copies under stagedroot/ that no entry uses (and an interrupted copy: a temp name, or an older version's HASH.tmp). */
export function removeUnusedKernels(ctx: Context, boot: string, used: ReadonlySet<string>, seen = new SeenPaths()): void {
  for (const h of seen.list(path.join(boot, 'stagedroot'))) if (!used.has(h)) ctx.dfs.removeTree(path.join(boot, 'stagedroot', h));
}
