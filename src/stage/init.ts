import type { Context } from '../context.js';
import { StagedrootError } from '../errors.js';
import { copyTree } from '../fs/copy-tree.js';
import { exists, fileSha256, isDirectory, listDir, syncFilesystem, writeJson } from '../fs/durable.js';
import { ManifestWriter } from '../fs/manifest.js';
import { patchManifest } from '../fs/patch-manifest.js';
import { RootFs, type TouchEvent } from '../fs/root-fs.js';
import type { BaseState } from '../state/schema.js';
import { saveState } from '../state/store.js';
import type { Source } from '../sources/source.js';
import { applyChanges } from './apply-changes.js';

export interface InitOptions {
  /** A directory to copy as the first tree. */
  fromDirectory?: string;
  /** A source applied over the (empty or copied) first tree. */
  source?: Source;
  label?: string;
  bootTries?: number;
}

/**
 * Creates a sysroot whose first deployment is current, booted and good. The state file
 * is written last: a crash before it leaves no sysroot, and the leftovers are cleared by
 * the next `init`.
 */
export async function initSysroot(ctx: Context, o: InitOptions = {}): Promise<BaseState> {
  const { layout, dfs } = ctx;
  if (o.bootTries !== undefined && !(Number.isInteger(o.bootTries) && o.bootTries >= 1 && o.bootTries <= 100)) {
    throw new StagedrootError('USAGE', `Expected --boot-tries to be an integer from 1 to 100, got ${String(o.bootTries)}`, { option: 'bootTries', value: o.bootTries });
  }
  if (exists(layout.stateFile) || exists(layout.stateBackup)) {
    throw new StagedrootError('SYSROOT_EXISTS', `${layout.root} already holds a sysroot`, { path: layout.root });
  }
  if (o.fromDirectory !== undefined && !isDirectory(o.fromDirectory)) {
    throw new StagedrootError('USAGE', `--from ${o.fromDirectory} is not a directory`, { option: 'from', value: o.fromDirectory });
  }
  // Leftovers of an init that crashed before writing its state.
  for (const n of listDir(layout.root)) {
    if (['deploy', 'work', 'trash', 'current'].includes(n) || n.startsWith('.current.new-')) dfs.removeTree(`${layout.root}/${n}`);
  }
  dfs.mkdir(layout.deployDir);
  dfs.mkdir(layout.workDir);
  const id = '0001';
  const work = layout.work(id);
  const tree = `${work}/tree`;
  dfs.mkdir(work);
  dfs.mkdir(tree);
  const pre = `${work}/manifest.pre.ndjson`;
  let entries = 0;
  let bytes = 0;
  if (o.fromDirectory !== undefined) {
    const r = copyTree({ src: o.fromDirectory, dst: tree, policy: { hardlinkPrefixes: [], mode: 'reflink' }, manifestOut: pre, faults: ctx.faults, onSkip: (rel, why) => ctx.warn(`skipped ${rel}: ${why}`) });
    entries = r.entries;
    bytes = r.bytes;
  } else {
    new ManifestWriter(pre, ctx.faults).close(false);
  }
  const events: TouchEvent[] = [];
  let description = o.fromDirectory ? `directory ${o.fromDirectory}` : 'empty tree';
  let label = o.label;
  if (o.source) {
    const cs = await o.source.plan({ root: tree, readFile: (p) => new RootFs(tree).readFile(p) });
    await applyChanges(new RootFs(tree, { faults: ctx.faults, durability: 'deferred', onTouch: (e) => events.push(e) }), cs);
    description = cs.description;
    label ??= cs.label;
  }
  const patched = patchManifest(tree, pre, `${work}/manifest.ndjson`, events, ctx.faults);
  entries = patched.entries;
  dfs.unlink(pre);
  writeJson(dfs, `${work}/delta.json`, { changed: [], removed: [] });
  await syncFilesystem(work);
  dfs.rename(work, layout.deployment(id));
  dfs.replaceSymlink(layout.currentLink, layout.linkTarget(id));
  const state: BaseState = {
    version: 1,
    current: id,
    booted: id,
    staged: null,
    rollback: null,
    lastFailure: null,
    finalizeFailure: null,
    bootTries: o.bootTries ?? 3,
    deployments: [
      { id, label: label ?? 'initial', createdAt: ctx.now().toISOString(), parent: null, status: 'ready', good: true, triesLeft: null, pinned: false, locked: false, entries, bytes, manifestSha256: fileSha256(layout.manifest(id)), source: description, failure: null },
    ],
  };
  saveState(layout, dfs, { ...state, intent: null });
  return state;
}
