import type { ChangeOp, ChangeSet, SharedContent } from '../changeset.js';
import type { Context } from '../context.js';
import type { Issue } from '../errors.js';
import type { CopyExclude, CopyPolicy, CopyProgress, CopyResult } from '../fs/trees/copy-tree.js';
import { writeJson } from '../fs/trees/durable.js';
import { ManifestWriter } from '../fs/manifests/manifest.js';
import type { ManifestEntry } from '../fs/manifests/manifest-line.js';
import { displayPath } from '../fs/core/names.js';
import { readNames } from '../fs/core/walk.js';
import { RootFs, type TouchEvent } from '../fs/trees/root-fs.js';
import { runTreeTask, treeWorkersAvailable, type TreeJobOptions } from '../fs/jobs/tree-jobs.js';
import { treeTasks, type CopyArgs } from '../fs/trees/tasks.js';
import { manifestTasks } from '../fs/manifests/tasks.js';
import { copyTreeSplit } from '../fs/trees/copy-split.js';
import type { PatchResult } from '../fs/manifests/patch-manifest.js';
import { ManifestIndex } from '../fs/manifests/manifest-index.js';
import { compareEntry } from '../fs/manifests/verify-tree.js';
import { isUnder } from '../fs/core/paths.js';
import { overlayFile } from '../fs/manifests/manifest-overlay.js';
import { summaryFile } from '../fs/manifests/manifest-summary.js';
import { noFaults, type FaultHook } from '../fs/core/faults.js';
import type { TreeIo } from '../fs/trees/tree-io.js';
import { availableParallelism } from 'node:os';
import { snapshotsFrom, storageKind, type StorageKind } from '../fs/trees/storage.js';
import { labelTouched } from '../fs/trees/selinux.js';
import { applyChanges, type ApplyProgress } from '../apply-changes.js';

export interface BuildTreeOptions {
  /** The private work dir: the tree goes to `work/tree`, its manifest and delta beside it. */
  work: string;
  /** The tree to start from (omitted: an empty tree), with its manifest when it has one. */
  /**
   * `replaced`: the change set replaces the whole tree (nothing is copied). `keep`: only
   * these top-level entries of the base are copied, the change set builds the rest (the
   * others are reported removed, as a replaced tree's are); a base with a manifest only.
   */
  from?: { tree: string; manifest?: string; entries?: number | null; policy: CopyPolicy; exclude?: CopyExclude; manifestSha256?: string | null; replaced?: boolean; keep?: string[] };
  changes?: ChangeSet;
  onCopy?: (p: CopyProgress) => void;
  onApply?: (p: ApplyProgress) => void;
  /** Called once the tree exists (a later failure then has a tree to keep for diagnosis). */
  onTreeBuilt?: () => void;
  /** Takes the change set's ops under shared directories (see SharedDivert). */
  divert?: (op: ChangeOp, root: RootFs, mode?: SharedContent) => Promise<number | null>;
  /**
   * Called after the change set, before the mount points are settled: something that
   * changes the tree outside the safe-fs layer (a `stage --run` command). The manifest is
   * then walked whole and the delta is the difference to the base manifest.
   */
  afterApply?: (tree: string) => Promise<void>;
  /** Called after the change set, with the tree (writes recorded in the manifest): shared mount points settled. */
  settle?: (root: RootFs) => void;
  /** Called as each step starts (a failure after it belongs to that step). */
  onStep?: (step: 'copy' | 'apply' | 'manifest') => void;
  /** Cancels the tree work between two entries (ABORTED). */
  signal?: AbortSignal;
  /** Where a write of a layer store file may hardlink it (see ApplyOptions.linkAt); absent: every file written. */
  linkAt?: (rel: string) => boolean;
  /** A copy of the base's `keep` started before the plan (startKeptCopy): taken when it is the copy this tree needs, else removed first. */
  early?: EarlyCopy;
}

export interface BuiltTree {
  tree: string;
  manifest: string;
  /** Paths the update wrote that exist afterwards (what validators look at). */
  delta: string[];
  /** Their manifest entries, read once the update was applied (ValidationContext.deltaEntries). */
  changed: ManifestEntry[];
  /** Paths the update removed (and did not write again). */
  removed: string[];
  entries: number;
  bytes: number;
  /** The manifest's digest as the state records it, hashed as it was written (absent: hash the file). */
  manifestSha256?: string;
  /**
   * The manifest's overlay, when the manifest is a link to the base's file (see
   * linked-manifest.ts): the sync step makes it durable with the manifest.
   */
  overlay?: string;
  /** The linked manifest file's summary beside it (see manifest-summary.ts), made durable with it. */
  summary?: string;
  /**
   * The paths of the delta (written or removed) whose entry is the base manifest's, when
   * the manifest pass could tell (see SnapshotManifestResult.same): the others changed.
   * Absent: compare the two manifests (changedByManifests).
   */
  same?: string[];
  /** How the tree is stored (a btrfs subvolume, or a plain directory). */
  storage: StorageKind;
  /** What the change set's source warned about (accepted, but worth saying). */
  warnings: Issue[];
}

/** Below this many entries a copy is not worth splitting (a worker's start and the cuts cost more). */
const SPLIT_MIN_ENTRIES = 20_000;

/**
 * How many parts a copy is split into: one per core (at most 4) for a big tree, when the
 * work runs on workers and no fault hook counts the calls (a crash test needs them in one
 * order). STAGEDROOT_COPY_PARTS=N forces N.
 */
export function copyParts(entries: number | null, faults: FaultHook): number {
  const forced = process.env.STAGEDROOT_COPY_PARTS;
  if (forced !== undefined && /^[1-9]\d*$/.test(forced)) return Number(forced);
  if (entries === null || entries < SPLIT_MIN_ENTRIES || faults !== noFaults || !treeWorkersAvailable()) return 1;
  return Math.max(1, Math.min(4, availableParallelism()));
}

/**
 * Builds a deployment's tree in its work dir: the base tree copied (or snapshotted), the
 * change set applied through the safe-fs layer, the manifest written and the delta
 * finalize re-checks recorded. Shared by init and stage. A base with a manifest (a
 * deployment) is trusted under the hardlink prefixes: those trees are linked without a
 * look at each file and their manifest lines taken from the base manifest. A directory
 * with none (init) is copied with its manifest written on the way, then patched.
 */
export async function buildTree(ctx: Context, o: BuildTreeOptions): Promise<BuiltTree> {
  const { dfs } = ctx;
  const tree = `${o.work}/tree`;
  const pre = `${o.work}/manifest.pre.ndjson`;
  const manifest = `${o.work}/manifest.ndjson`;
  const storage = storageKind(ctx.layout.root, ctx.storage);
  dfs.mkdir(o.work);
  let bytes = 0;
  let preParts = [pre];
  const sockets: string[] = [];
  const devices: string[] = [];
  const mounted: string[] = [];
  const jobs = {
    faults: ctx.faults,
    signal: o.signal,
    onSkip: (rel: string, why: string) => (why === 'socket' ? sockets : why === 'mount point' ? mounted : devices).push(rel),
    onWarn: ctx.warn,
  };
  // A base with a manifest (a deployment) is trusted under the hardlink prefixes, as a
  // snapshot is: the new manifest is written in one pass after the change set, from the
  // base manifest's lines there and a walk of the rest (snapshotManifest).
  const trusted = o.from && o.from.manifest !== undefined ? { ...o.from, manifest: o.from.manifest } : null;
  const keep = trusted?.keep;
  const snapshotOf = trusted !== null && !trusted.replaced && keep === undefined && snapshotsFrom(ctx.layout.root, ctx.storage, trusted.tree) ? trusted : null;
  // The change set replaces the whole tree (it starts by clearing it: an image from the
  // layer store): nothing is copied, and the manifest step is told that every top-level
  // entry of the base went, as the clear of a copy would have said. With `keep`, the
  // others went (the change set makes them again from nothing).
  const left = trusted === null ? [] : trusted.replaced === true ? readNames(trusted.tree) : keep !== undefined ? leftOut(trusted.tree, keep) : [];
  const replaced = trusted !== null && trusted.replaced === true ? left.map((name): TouchEvent => ({ kind: 'remove', path: name })) : null;
  const omitted = keep !== undefined && replaced === null ? left.map((name): TouchEvent => ({ kind: 'remove', path: name })) : [];
  const exclude = omitted.length === 0 ? o.from?.exclude : omitting(o.from?.exclude, left);
  // The copy a base with `keep` gets (the one an early copy may have made already).
  const wanted = o.from && replaced === null && snapshotOf === null ? copyArgs(ctx, o.work, o.from, trusted !== null, exclude) : null;
  const early = o.early === undefined ? null : await takeEarly(ctx, o.early, wanted, tree);
  if (replaced !== null) {
    await runTreeTask(treeTasks.makeTree, { kind: storage, path: tree }, { faults: ctx.faults });
    o.onStep?.('copy');
  } else if (snapshotOf !== null) {
    // O(1) in the tree: a snapshot; its manifest is written after the change set, below.
    o.onStep?.('copy');
    await runTreeTask(treeTasks.snapshotTree, { src: snapshotOf.tree, dst: tree }, { faults: ctx.faults });
    o.onCopy?.({ done: snapshotOf.entries ?? 0, total: snapshotOf.entries ?? 0, bytes: 0 });
  } else if (early !== null) {
    // Copied while the plan ran: what it skipped said now, its progress as one step.
    o.onStep?.('copy');
    for (const [rel, why] of early.skipped) jobs.onSkip(rel, why);
    o.onCopy?.({ done: early.copied.result.entries, total: o.from?.entries ?? early.copied.result.entries, bytes: early.copied.result.bytes });
    preParts = early.copied.manifests;
    bytes += early.copied.result.bytes;
  } else {
    await runTreeTask(treeTasks.makeTree, { kind: storage, path: tree }, { faults: ctx.faults });
    o.onStep?.('copy');
    if (o.from) {
      // On worker threads (split in parts on a big tree): the caller's event loop keeps running.
      // Trusting the base manifest, the copy writes none (see below); otherwise it writes the pre-manifest.
      const copied = await runCopy(wanted!, { ...jobs, onProgress: o.onCopy });
      preParts = copied.manifests;
      bytes += copied.result.bytes;
    } else {
      new ManifestWriter(pre, ctx.faults).close(false);
    }
  }
  // Sockets are runtime objects (their listener is gone); device nodes come from
  // devtmpfs at boot: neither is kept, and the user is told which.
  if (sockets.length > 0) ctx.warn(`skipped ${sockets.length} socket${sockets.length === 1 ? '' : 's'} (runtime objects, not kept): ${sockets.map(displayPath).join(', ')}`);
  if (mounted.length > 0) ctx.warn(`skipped ${mounted.length} mount point${mounted.length === 1 ? '' : 's'} that ${mounted.length === 1 ? 'is not a directory' : 'are not directories'} (another filesystem is never copied): ${mounted.map(displayPath).join(', ')}`);
  if (devices.length > 0) ctx.warn(`skipped ${devices.length} device node${devices.length === 1 ? '' : 's'} (devices come from devtmpfs at boot, not from a tree): ${devices.map(displayPath).join(', ')}`);
  o.onTreeBuilt?.();
  o.onStep?.('apply');
  const applied = await applyUpdate(ctx, tree, o);
  bytes += applied.bytes;
  const { warnings } = applied;
  const events = replaced === null ? [...omitted, ...applied.events] : [...replaced, ...applied.events];
  o.onStep?.('manifest');
  let patched: PatchResult;
  let overlay: string | undefined;
  let summary: string | undefined;
  let same: string[] | undefined;
  if (trusted !== null) {
    // One pass: the base manifest's lines under the hardlink prefixes, the rest of the new tree walked, the changes re-read.
    // A base whose manifest digest is recorded: its file linked, only an overlay written (see linked-manifest.ts).
    const link = trusted.manifestSha256 === undefined ? {} : { link: { digest: trusted.manifestSha256, entries: trusted.entries ?? null } };
    // A tree a command changed, or one the change set replaced whole: the delta is what differs from the base manifest, taken in the same task.
    const againstBase = o.afterApply !== undefined || replaced !== null;
    const r = await runTreeTask(manifestTasks.snapshotManifest, { tree, base: trusted.manifest, baseTree: trusted.tree, out: manifest, trust: trusted.policy.hardlinkPrefixes, events, ...link, linksHold: o.afterApply === undefined, ...(againstBase ? { deltaAgainstBase: true } : {}) }, jobs);
    bytes = r.bytes; // the sizes of the files the manifest lists: the new tree's, update included
    patched = r;
    same = againstBase ? undefined : r.same;
    if (r.linked) overlay = overlayFile(manifest);
    if (r.summarized === true) summary = summaryFile(manifest);
  } else {
    patched = await runTreeTask(manifestTasks.patchManifest, { tree, before: preParts, after: manifest, events }, jobs);
    for (const p of preParts) dfs.unlink(p);
  }
  // A tree built again outside `keep`: what was rebuilt as the base had it is no change (finalize's merge carries the local edits there).
  if (keep !== undefined && trusted !== null && o.afterApply === undefined && replaced === null) {
    patched = { ...patched, ...narrowDelta(trusted.manifest, patched, (p) => !keep.some((k) => isUnder(p, k))) };
    same = undefined;
  }
  writeJson(dfs, `${o.work}/delta.json`, { changed: patched.changed, removed: patched.removed });
  return { tree, manifest, delta: patched.delta, changed: patched.changed, removed: patched.removed, entries: patched.entries, bytes, storage, warnings, ...(same === undefined ? {} : { same }), ...(patched.sha256 === undefined ? {} : { manifestSha256: patched.sha256 }), ...(overlay === undefined ? {} : { overlay }), ...(summary === undefined ? {} : { summary }) };
}

/** The top-level names of a base tree a copy of `keep` leaves out. */
function leftOut(tree: string, keep: readonly string[]): string[] {
  return readNames(tree).filter((n) => !keep.includes(n));
}

/** An exclusion with `left` omitted too. */
function omitting(exclude: CopyExclude | undefined, left: readonly string[]): CopyExclude {
  return { hollow: exclude?.hollow ?? [], omit: [...(exclude?.omit ?? []), ...left], ...(exclude?.device === undefined ? {} : { device: exclude.device }) };
}

/** A copy of the base tree into a work dir's tree, as buildTree runs it, and its key (the same copy, the same key). */
interface PlannedCopy {
  args: CopyArgs;
  parts: number;
  key: string;
}

function copyArgs(ctx: Context, work: string, from: NonNullable<BuildTreeOptions['from']>, trusted: boolean, exclude: CopyExclude | undefined): PlannedCopy {
  const base = { src: from.tree, dst: `${work}/tree`, policy: from.policy, srcManifest: from.manifest, total: from.entries ?? null, xattrPolicy: ctx.xattrPolicy, ...(exclude ? { exclude } : {}) };
  const args: CopyArgs = trusted ? { ...base, trust: true } : { ...base, manifestOut: `${work}/manifest.pre.ndjson` };
  const parts = copyParts(from.entries ?? null, ctx.faults);
  return { args, parts, key: JSON.stringify([args, parts]) };
}

function runCopy(c: PlannedCopy, jobs: TreeJobOptions): Promise<{ result: CopyResult; manifests: string[] }> {
  if (c.parts > 1) return copyTreeSplit(c.args, c.parts, jobs);
  return runTreeTask(treeTasks.copyTree, c.args, jobs).then((result) => ({ result, manifests: c.args.manifestOut === undefined ? [] : [c.args.manifestOut] }));
}

/**
 * A copy of the base tree's `keep` (usr/) into a stage's work dir, started before the plan
 * (stage.ts: an image update over an image deployment, whose tree is then likely built on
 * that copy) so that the copy's workers run while the plan imports the new layers and
 * models the change. buildTree takes it when its own copy would be this one (the same
 * arguments: the plan kept usr/ with the same policy), else waits for it and removes it.
 * It reports nothing while it runs (the stage is in its plan step): what it skipped is
 * said when it is taken. A failure (the disk full before the preflight could say so)
 * makes it not taken: the stage goes on as if it had never run.
 */
export interface EarlyCopy {
  readonly key: string;
  /** Settles when the copy ends: its result, or null when it failed or was stopped. */
  readonly done: Promise<{ copied: { result: CopyResult; manifests: string[] }; skipped: [string, string][] } | null>;
  /** Stops it (a failed stage): wait for `done` before removing the work dir. */
  stop(): void;
}

export function startKeptCopy(ctx: Context, work: string, from: NonNullable<BuildTreeOptions['from']> & { manifest: string; keep: string[] }, signal?: AbortSignal): EarlyCopy {
  return startCopy(ctx, work, copyArgs(ctx, work, from, true, omitting(from.exclude, leftOut(from.tree, from.keep))), { signal });
}

/**
 * A copy of the whole base tree into a stage's work dir, started before the plan of a
 * source whose change set is applied over that copy (SourceInfo.overBase: an update
 * spec, an Ignition config), so that the copy's workers run while the main thread plans:
 * the copy buildTree would make, taken the same way (see startKeptCopy). `gate`: the
 * copy starts once it resolves true (the free-space preflight's figure for the copy:
 * there is room for it), and is never made when it resolves false or rejects (done:
 * null; the preflight then says why).
 */
export function startBaseCopy(ctx: Context, work: string, from: NonNullable<BuildTreeOptions['from']> & { manifest: string }, o: { signal?: AbortSignal; gate?: Promise<boolean> } = {}): EarlyCopy {
  return startCopy(ctx, work, copyArgs(ctx, work, from, true, from.exclude), o);
}

function startCopy(ctx: Context, work: string, planned: PlannedCopy, o: { signal?: AbortSignal; gate?: Promise<boolean> }): EarlyCopy {
  const stop = new AbortController();
  const skipped: [string, string][] = [];
  const jobs: TreeJobOptions = { faults: ctx.faults, signal: o.signal === undefined ? stop.signal : AbortSignal.any([o.signal, stop.signal]), onSkip: (rel, why) => void skipped.push([rel, why]), onWarn: ctx.warn };
  const done = (async () => {
    if (o.gate !== undefined && !(await o.gate)) return null;
    if (jobs.signal!.aborted) return null; // stopped before it began: nothing written
    ctx.dfs.mkdir(work);
    await runTreeTask(treeTasks.makeTree, { kind: storageKind(ctx.layout.root, ctx.storage), path: `${work}/tree` }, { faults: ctx.faults });
    return { copied: await runCopy(planned, jobs), skipped };
  })().catch(() => null);
  return { key: planned.key, done, stop: () => stop.abort() };
}

/** The early copy when it is `wanted` and whole; else null, once it has stopped and its tree is gone. */
async function takeEarly(ctx: Context, early: EarlyCopy, wanted: PlannedCopy | null, tree: string): Promise<Awaited<EarlyCopy['done']>> {
  if (wanted === null || wanted.key !== early.key) early.stop();
  const got = await early.done;
  if (got !== null && wanted !== null && wanted.key === early.key) return got;
  await runTreeTask(treeTasks.removeTree, { path: tree }, { faults: ctx.faults });
  return null;
}

/** What applying an update to a tree did: the entries it touched, the bytes it wrote, what its source warned about. */
export interface AppliedUpdate {
  root: RootFs;
  events: TouchEvent[];
  bytes: number;
  warnings: Issue[];
}

/**
 * The apply step of a stage, shared by the stage and its dry run: the change set applied
 * to `tree` through the safe-fs layer (entries under shared directories diverted), what
 * the update wrote labelled, the shared mount points settled, the boot mount points
 * made. With `io` (a dry run's OverlayIo) every write lands in that layer, and nothing
 * is labelled (labelling runs a tool on the disk).
 */
export async function applyUpdate(ctx: Context, tree: string, o: Pick<BuildTreeOptions, 'changes' | 'onApply' | 'divert' | 'settle' | 'afterApply' | 'linkAt'> & { io?: TreeIo }): Promise<AppliedUpdate> {
  const events: TouchEvent[] = [];
  const warnings: Issue[] = [];
  let bytes = 0;
  const root = new RootFs(tree, {
    faults: o.io ? noFaults : ctx.faults,
    durability: 'deferred',
    // The stage's work tree is its own: its directories are resolved once (see cacheDirs).
    cacheDirs: o.io === undefined,
    onTouch: (e) => events.push(e),
    xattrPolicy: ctx.xattrPolicy,
    onXattrDrop: (rel, name, why) => ctx.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`),
    ...(o.io ? { io: o.io } : {}),
  });
  if (o.changes) {
    const applied = await applyChanges(root, o.changes, o.onApply, o.divert, undefined, o.io || !o.linkAt ? {} : { linkAt: o.linkAt });
    bytes += applied.bytes;
    warnings.push(...applied.warnings);
    // What the update wrote is labelled by the new tree's own SELinux policy, if it has one.
    if (!o.io) labelTouched(root, events, { policy: ctx.xattrPolicy, onDrop: (rel, name, why) => ctx.warn(`dropped the extended attribute ${name} of ${displayPath(rel)}: ${why}`) });
  }
  if (o.afterApply) {
    await o.afterApply(tree);
    root.forgetDirs(); // the command may have changed any directory
  }
  o.settle?.(root);
  ensureMountPoints(root);
  return { root, events, bytes, warnings };
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

/**
 * The delta without the entries, among those `only` selects, that the base manifest has
 * the same (type, mode, owner, content, target, extended attributes): written again as
 * they were. O(those entries) lookups (ManifestIndex), not a read of the manifest.
 */
function narrowDelta(base: string, d: Pick<PatchResult, 'delta' | 'changed' | 'removed'>, only: (p: string) => boolean): Pick<PatchResult, 'delta' | 'changed' | 'removed'> {
  const index = new ManifestIndex(base);
  try {
    const changed = d.changed.filter((e) => {
      if (!only(e.p)) return true;
      const b = index.find(e.p);
      return b === null || compareEntry(b, e).length > 0;
    });
    return { delta: changed.map((e) => e.p), changed, removed: d.removed };
  } finally {
    index.close();
  }
}

