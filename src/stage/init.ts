import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { syncFilesystem } from '../fs/trees/durable.js';
import { exists, isDirectory, listDir } from '../fs/core/host-paths.js';
import { runTreeTask } from '../fs/jobs/tree-jobs.js';
import { manifestTasks } from '../fs/manifests/tasks.js';
import { ReadOnlyTree } from '../fs/trees/read-only-tree.js';
import { isLegacyTempName, isTempName } from '../fs/core/temp-names.js';
import { newRecord } from '../state/model.js';
import type { BaseState } from '../state/schema.js';
import { saveState } from '../store/state-file.js';
import { bootDirRecord } from '../boot/entries/boot-dir.js';
import { syncBootEntries, type BootLoader } from '../boot/entries/sync.js';
import { findKernel, KERNEL_PLACES } from '../boot/entries/kernels.js';
import { kernelArgumentProblem } from '../state/kernel-args.js';
import * as path from 'node:path';
import type { Source } from '../sources/source.js';
import { buildTree } from './build-tree.js';
import { DEFAULT_MERGED, DEFAULT_SHARED, normalizeDirs, sharedListText } from '../persistent-dirs/config.js';
import { moveOutShared } from '../persistent-dirs/mount-points.js';
import type { DurableFs } from '../fs/trees/durable.js';
import { addTrustedKey, readPublicKeyFile } from '../trust/keys.js';
import { checkSource } from './check-source.js';
import type { CopyExclude, CopyPolicy, CopyProgress } from '../fs/trees/copy-tree.js';
import type { RootFs } from '../fs/trees/root-fs.js';

export interface InitOptions {
  /** A directory to copy as the first tree. */
  fromDirectory?: string;
  /** A source applied over the (empty or copied) first tree. */
  source?: Source;
  label?: string;
  bootTries?: number;
  /**
   * Shared directories (tree-relative; default ["var"]): machine state kept once in the
   * sysroot, bound into whichever deployment boots, never copied or rolled back. The
   * first tree's content there becomes their initial content.
   */
  shared?: string[];
  /** Directories whose local changes finalize carries into a new deployment (default ["etc"]). */
  merged?: string[];
  /** minisign/signify public key files: with one, every later stage needs a valid signature. */
  trustedKeys?: readonly string[];
  /** Where boot entries go, rewritten by every transition: /boot (bls), the ESP (systemd-boot), GRUB's directory /boot/grub (grub). */
  bootDir?: string;
  /** The form of the entries (default `bls`): see BaseState.bootLoader. */
  bootLoader?: BootLoader;
  /** The first deployment's kernel arguments (later ones inherit and change them). */
  kernelArguments?: string[];
  /** How `fromDirectory` is copied (default: reflinked or copied, nothing linked) and what of it is left out. */
  fromPolicy?: CopyPolicy;
  fromExclude?: CopyExclude;
  /** What the first deployment's record says it came from (default: the directory or source). */
  sourceDescription?: string;
  /** Progress of the copy of `fromDirectory`. */
  onCopy?: (p: CopyProgress) => void;
  /** Called with the first tree before its shared directories move out (through the safe-fs layer: the manifest follows). */
  prepareTree?: (root: RootFs) => void;
}

/** Creates `host` and its missing parents below `root`, each made durable. */
export function mkdirs(dfs: DurableFs, root: string, host: string): void {
  const parts = host.slice(root.length + 1).split('/');
  for (let i = 1; i <= parts.length; i++) dfs.mkdir(`${root}/${parts.slice(0, i).join('/')}`);
}

/**
 * Creates a sysroot whose first deployment is current, booted and good. The state file
 * is written last: a crash before it leaves no sysroot, and the leftovers are cleared by
 * the next `init`.
 */
export async function initSysroot(ctx: Context, o: InitOptions = {}): Promise<void> {
  const { layout, dfs } = ctx;
  if (o.bootTries !== undefined && !(Number.isInteger(o.bootTries) && o.bootTries >= 1 && o.bootTries <= 100)) {
    throw new StagedrootError('USAGE', `Expected --boot-tries to be an integer from 1 to 100, got ${String(o.bootTries)}`, { option: 'bootTries', value: o.bootTries });
  }
  const merged = normalizeDirs(o.merged ?? DEFAULT_MERGED, 'merged');
  const shared = normalizeDirs(o.shared ?? DEFAULT_SHARED, 'shared', merged);
  if (o.bootDir !== undefined && (!path.isAbsolute(o.bootDir) || !isDirectory(o.bootDir))) {
    throw new StagedrootError('USAGE', `Expected --boot-dir to be an existing directory given by its absolute path, got ${JSON.stringify(o.bootDir)}`, { option: 'bootDir', value: o.bootDir });
  }
  if (o.bootLoader !== undefined && !BOOT_LOADERS.includes(o.bootLoader)) {
    throw new StagedrootError('USAGE', `Expected --boot-loader to be one of ${BOOT_LOADERS.join(', ')}, got ${JSON.stringify(o.bootLoader)}`, { option: 'bootLoader', value: o.bootLoader });
  }
  if (o.bootLoader !== undefined && o.bootDir === undefined) {
    throw new StagedrootError('USAGE', '--boot-loader needs --boot-dir (where its entries go)', { option: 'bootLoader', value: o.bootLoader });
  }
  for (const a of o.kernelArguments ?? []) {
    const problem = kernelArgumentProblem(a);
    if (problem) throw new StagedrootError('USAGE', `Expected --kernel-argument to be one word, got ${JSON.stringify(a)}: ${problem}`, { option: 'kernelArguments', value: a });
  }
  if (exists(layout.stateFile) || exists(layout.stateBackup)) {
    throw new StagedrootError('SYSROOT_EXISTS', `${layout.root} already holds a sysroot`, { path: layout.root });
  }
  if (o.fromDirectory !== undefined && !isDirectory(o.fromDirectory)) {
    throw new StagedrootError('USAGE', `--from ${o.fromDirectory} is not a directory`, { option: 'from', value: o.fromDirectory });
  }
  const keys = (o.trustedKeys ?? []).map(readPublicKeyFile); // bad key files: USAGE, before anything is written
  // A first deployment from a source is held to the keys it is given, like every later stage.
  // Its identity (an image's digest) is recorded as any stage's is: a later update of the same image is then nothing to do.
  const checked = o.source ? await checkSource(layout, o.source, { keys }) : null;
  // Leftovers of an init that crashed before writing its state.
  for (const n of listDir(layout.root)) {
    if (['deploy', 'work', 'trash', 'current', 'trusted-keys', 'shared', 'shared.list', 'kept'].includes(n) || isTempName(n) || isLegacyTempName(n, (t) => t === 'current' || t === 'shared.list')) dfs.removeTree(`${layout.root}/${n}`);
  }
  dfs.mkdir(layout.deployDir);
  dfs.mkdir(layout.workDir);
  const id = '0001';
  const work = layout.work(id);
  dfs.mkdir(work);
  // A source is planned against what it is applied to: the directory to copy, or an empty tree.
  const planRoot = o.fromDirectory ?? `${work}/empty`;
  if (o.fromDirectory === undefined) dfs.mkdir(planRoot);
  const cs = o.source ? await o.source.plan(new ReadOnlyTree(planRoot)) : undefined;
  const built = await buildTree(ctx, {
    work,
    from: o.fromDirectory === undefined ? undefined : { tree: o.fromDirectory, policy: o.fromPolicy ?? { hardlinkPrefixes: [], mode: 'reflink' }, ...(o.fromExclude ? { exclude: o.fromExclude } : {}) },
    changes: cs,
    onCopy: o.onCopy,
    settle: (root) => {
      o.prepareTree?.(root);
      moveOutShared(root, shared, (rel) => layout.shared(rel), (host) => mkdirs(dfs, layout.root, host));
    },
  });
  if (o.fromDirectory === undefined) dfs.removeTree(planRoot);
  for (const w of built.warnings) ctx.warn(`${w.code} at ${w.path || '(root)'}: ${w.message}`);
  const description = o.sourceDescription ?? cs?.description ?? (o.fromDirectory ? `directory ${o.fromDirectory}` : 'empty tree');
  const label = o.label ?? cs?.label ?? checked?.info.label ?? 'initial';
  await syncFilesystem(work);
  dfs.rename(work, layout.deployment(id));
  dfs.writeFileAtomic(layout.sharedList, sharedListText(shared));
  dfs.replaceSymlink(layout.currentLink, layout.linkTarget(id));
  const boot = o.bootDir === undefined ? {} : bootConfig(layout.root, o.bootDir, o.bootLoader, layout.tree(id));
  const manifestSha256 = built.manifestSha256 ?? (await runTreeTask(manifestTasks.hashFile, { file: layout.manifest(id) }));
  const state: BaseState = {
    version: 1,
    current: id,
    booted: id,
    staged: null,
    rollback: null,
    lastFailure: null,
    finalizeFailure: null,
    bootTries: o.bootTries ?? 3,
    lastId: id,
    shared,
    merged,
    lastMerge: null,
    finishPending: null,
    ...boot,
    deployments: [{ ...newRecord({ id, label, parent: null, at: ctx.now().toISOString(), source: description, entries: built.entries, bytes: built.bytes, manifestSha256, good: true, kernelArguments: o.kernelArguments }), ...(checked?.info.origin ? { origin: checked.info.origin } : {}) }],
  };
  for (const k of keys) addTrustedKey(ctx, k);
  saveState(layout, dfs, { ...state, intent: null });
  syncBootEntries(ctx, state);
}

const BOOT_LOADERS: readonly BootLoader[] = ['bls', 'systemd-boot', 'grub'];

/**
 * The state's boot fields for `--boot-dir`. Refuses a first deployment without a kernel
 * (an init that writes no entry would look like it worked), and GRUB's directory on
 * another filesystem than the sysroot (GRUB reads the kernels from the deployments'
 * trees there).
 */
function bootConfig(root: string, bootDir: string, loader: BootLoader | undefined, tree: string): Pick<BaseState, 'bootDir' | 'bootLoader' | 'bootDirFromSysroot'> {
  if (findKernel(tree) === null) {
    throw new StagedrootError('USAGE', `--boot-dir ${bootDir}: the first deployment ships no kernel (looked for ${KERNEL_PLACES}), so there is nothing to boot from entries; give a tree with a kernel, or leave out --boot-dir (the initramfs then follows current)`, { option: 'bootDir', value: bootDir });
  }
  const record = bootDirRecord(root, bootDir);
  if (loader === 'grub' && record.bootDirFromSysroot === undefined) {
    throw new StagedrootError('USAGE', `--boot-loader grub: GRUB's directory ${bootDir} is not on the sysroot's filesystem; GRUB reads each deployment's kernel from its tree, which needs /boot on the same filesystem as the sysroot (Debian's default layout). With a separate /boot, use GRUB with blscfg (--boot-loader bls) or systemd-boot`, { option: 'bootDir', value: bootDir });
  }
  return { ...record, ...(loader === undefined ? {} : { bootLoader: loader }) };
}
