/**
 * Stage's O(update) type-conflict check against the full planner, on random trees: a
 * booted tree, local edits before the stage, an update applied through the safe-fs layer
 * (directories turned into files and back, removals, writes below removed or replaced
 * paths), local edits after it. The rows of the update's own paths and their ancestors
 * (binary search in the manifests, a few lstats) must give exactly the type conflicts
 * of a plan over every row; the rows finalize takes from its worker (live ≠ staged
 * only) must give exactly the full plan; and apply-live's plan (planLiveMerge's rows: those
 * paths, the live entries below what the update removed or made a non-directory) must be
 * the full plan on its paths, with the same kept versions, conflicts and type conflicts,
 * every action it leaves out a carry of a path the update does not decide (for the carry
 * into the live-applied deployment). Replay a failure with STAGEDROOT_MERGE_SEED.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { copyTree } from '../../src/fs/trees/copy-tree.js';
import { ManifestIndex } from '../../src/fs/manifests/manifest-index.js';
import { readManifest } from '../../src/fs/manifests/manifest.js';
import { changedRows, forEachRow, lookupRows, type Row } from '../../src/merge/merge-rows.js';
import { patchManifest } from '../../src/fs/manifests/patch-manifest.js';
import { RootFs, type TouchEvent } from '../../src/fs/trees/root-fs.js';
import { liveMergePaths } from '../../src/merge/merge.js';
import { planMerge, rowsAlwaysPlanned, typeConflictPaths, type UpdatePaths } from '../../src/merge/plan.js';
import { DIST_INDEX, requireDist } from '../helpers/crash.js';
import { prng, seedFrom } from '../helpers/random.js';

const SEED = seedFrom('STAGEDROOT_MERGE_SEED');
const CASES = 250;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'type-conflicts-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
/** A path under etc/ from a small name space, so that edits and the update meet often. */
const randPath = (r: Rand): string => ['etc', ...Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(r, ['a', 'b', 'c']))].join('/');
const ancestors = (p: string): string[] => p.split('/').slice(1, -1).map((_, i, xs) => ['etc', ...xs.slice(0, i + 1)].join('/'));
const lstat = (host: string): fs.Stats | null => {
  try {
    return fs.lstatSync(host);
  } catch {
    return null;
  }
};

/** One local edit of the running system, straight on the live tree (what a node agent or an admin does). */
function localEdit(r: Rand, live: string): void {
  const p = randPath(r);
  const host = path.join(live, p);
  const op = pick(r, ['file', 'file', 'dir', 'remove', 'chmod', 'symlink'] as const);
  const reachable = ancestors(p).every((a) => lstat(path.join(live, a))?.isDirectory() === true);
  if (op === 'remove') return reachable ? fs.rmSync(host, { recursive: true, force: true }) : undefined;
  if (op === 'chmod') {
    if (!reachable) return;
    if (lstat(host)?.isSymbolicLink() === false) fs.chmodSync(host, pick(r, [0o600, 0o640, 0o755]));
    return;
  }
  for (const a of ancestors(p)) {
    const st = lstat(path.join(live, a));
    if (st !== null && !st.isDirectory()) fs.rmSync(path.join(live, a));
    if (lstat(path.join(live, a)) === null) fs.mkdirSync(path.join(live, a));
  }
  const st = lstat(host);
  if (op === 'dir') {
    if (st !== null && !st.isDirectory()) fs.rmSync(host);
    if (lstat(host) === null) fs.mkdirSync(host);
    return;
  }
  if (st !== null && (st.isDirectory() || st.isSymbolicLink() || op === 'symlink')) fs.rmSync(host, { recursive: true });
  // A symlink to a sibling that may be a directory: the merge must never look through it.
  if (op === 'symlink') fs.symlinkSync(pick(r, ['a', 'b', 'missing']), host);
  else fs.writeFileSync(host, pick(r, ['x\n', 'y\n', `local ${r()}\n`]));
}

/** One operation of the update, through the safe-fs layer as stage applies it (its touch events recorded). */
function updateOp(r: Rand, root: RootFs, tree: string): void {
  const p = randPath(r);
  const op = pick(r, ['file', 'file', 'dir', 'remove', 'symlink'] as const);
  if (op === 'remove') {
    if (ancestors(p).every((a) => lstat(path.join(tree, a))?.isDirectory() === true)) root.remove(p, { recursive: true, missingOk: true });
    return;
  }
  // An update that writes below a file or a symlink removes it first (a spec's remove, then its file).
  for (const a of ancestors(p)) {
    if (lstat(path.join(tree, a))?.isDirectory() === false) root.remove(a);
    if (lstat(path.join(tree, a)) === null) root.mkdir(a);
  }
  const st = lstat(path.join(tree, p));
  if (op === 'dir') return root.mkdir(p, { replace: true, mode: pick(r, [0o755, 0o700]) });
  if (st !== null) root.remove(p, { recursive: true });
  if (op === 'symlink') root.symlink(p, pick(r, ['a', 'x']));
  else root.writeFile(p, Buffer.from(pick(r, ['x\n', 'u\n', `update ${r()}\n`])), { mode: pick(r, [0o644, 0o600]) });
}

interface Case {
  update: UpdatePaths;
  sources: { dir: string; baseManifest: string; newManifest: string; liveTree: string };
}

/** Builds one random case in `dir`: booted manifest, staged manifest and delta, live tree. */
function makeCase(r: Rand, dir: string): Case {
  const pristine = path.join(dir, 'pristine');
  fs.mkdirSync(path.join(pristine, 'etc'), { recursive: true });
  for (let i = 0; i < 4 + Math.floor(r() * 10); i++) localEdit(r, pristine);
  const copy = (src: string, dst: string, manifestOut: string): void => {
    fs.mkdirSync(dst);
    copyTree({ src, dst, policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut });
  };
  const live = path.join(dir, 'live');
  const baseManifest = path.join(dir, 'base.manifest');
  copy(pristine, live, baseManifest);
  for (let i = Math.floor(r() * 3); i > 0; i--) localEdit(r, live);
  // The staged tree: the live tree at stage time, then the update.
  const staged = path.join(dir, 'staged');
  const pre = path.join(dir, 'pre.manifest');
  copy(live, staged, pre);
  const events: TouchEvent[] = [];
  const root = new RootFs(staged, { onTouch: (e) => events.push(e) });
  for (let i = 1 + Math.floor(r() * 4); i > 0; i--) updateOp(r, root, staged);
  const newManifest = path.join(dir, 'new.manifest');
  const delta = patchManifest(staged, pre, newManifest, events);
  for (let i = Math.floor(r() * 4); i > 0; i--) localEdit(r, live);
  const update: UpdatePaths = { changed: new Map(delta.changed.map((e) => [e.p, e.t])), removed: new Set(delta.removed) };
  return { update, sources: { dir: 'etc', baseManifest, newManifest, liveTree: live } };
}

function allRows(c: Case): Row[] {
  const rows: Row[] = [];
  forEachRow(c.sources, (row) => rows.push(row));
  return rows;
}

describe(`merge type conflicts in O(update) (seed ${SEED})`, () => {
  it('equal the full planner\'s: same paths, same order, same wording; the changed rows give the full plan', () => {
    const r = prng(SEED);
    let withConflicts = 0;
    let ancestorConflicts = 0;
    let leftToCarry = 0;
    for (let i = 0; i < CASES; i++) {
      const dir = path.join(tmp, `case-${i}`);
      fs.mkdirSync(dir);
      const c = makeCase(r, dir);
      const full = planMerge(allRows(c), c.update, 'etc');
      const fast = planMerge(lookupRows({ ...c.sources, paths: typeConflictPaths(c.update, 'etc') }), c.update, 'etc');
      const changed = planMerge(changedRows({ ...c.sources, always: rowsAlwaysPlanned('etc') }), c.update, 'etc');
      const where = `case ${i} (seed ${SEED}): update ${JSON.stringify({ changed: [...c.update.changed], removed: [...c.update.removed] })}`;
      expect(fast.typeConflicts, where).toEqual(full.typeConflicts);
      expect(changed, where).toEqual(full);
      const livePaths = new Set(liveMergePaths(c.update, 'etc', c.sources.liveTree));
      const live = planMerge(lookupRows({ ...c.sources, paths: [...livePaths] }), c.update, 'etc');
      expect({ keep: live.keep, conflicts: live.conflicts, typeConflicts: live.typeConflicts }, where).toEqual({ keep: full.keep, conflicts: full.conflicts, typeConflicts: full.typeConflicts });
      expect(live.actions, where).toEqual(full.actions.filter((a) => livePaths.has(a.path)));
      const decided = (p: string): boolean => c.update.changed.has(p) || c.update.removed.has(p) || ancestors(p).some((a) => c.update.removed.has(a) || (c.update.changed.has(a) && c.update.changed.get(a) !== 'd'));
      for (const a of full.actions.filter((x) => !livePaths.has(x.path))) expect(decided(a.path), `${where}: ${a.path} is left to the carry`).toBe(false);
      if (full.actions.some((a) => !livePaths.has(a.path))) leftToCarry += 1;
      if (full.typeConflicts.length > 0) withConflicts += 1;
      if (full.typeConflicts.some((t) => t.update.includes('writes below'))) ancestorConflicts += 1;
      fs.rmSync(dir, { recursive: true });
    }
    // The generator must reach both kinds of conflict, or the comparison proves little.
    expect(withConflicts).toBeGreaterThan(CASES / 10);
    expect(ancestorConflicts).toBeGreaterThan(0);
    expect(leftToCarry).toBeGreaterThan(CASES / 10);
  });
});

describe('the merge rows on a worker thread (the compiled library, against its own inline rows)', () => {
  it('are the rows the same tasks give inline', async () => {
    requireDist();
    const dist = (rel: string): Promise<unknown> => import(pathToFileURL(path.join(path.dirname(DIST_INDEX), rel)).href);
    const jobs = (await dist('fs/jobs/tree-jobs.js')) as typeof import('../../src/fs/jobs/tree-jobs.js');
    const { rowTasks } = (await dist('merge/row-tasks.js')) as typeof import('../../src/merge/row-tasks.js');
    // Compared with the same build's rows inline: one instance of each module, dist/'s.
    const { lookupRows, changedRows } = (await dist('merge/merge-rows.js')) as typeof import('../../src/merge/merge-rows.js');
    expect(jobs.treeWorkersAvailable()).toBe(true);
    const r = prng(SEED + 1);
    for (let i = 0; i < 10; i++) {
      const dir = path.join(tmp, `worker-${i}`);
      fs.mkdirSync(dir);
      const c = makeCase(r, dir);
      const paths = typeConflictPaths(c.update, 'etc');
      expect(await jobs.runTreeTask(rowTasks.lookupRows, { ...c.sources, paths })).toEqual(lookupRows({ ...c.sources, paths }));
      const always = rowsAlwaysPlanned('etc');
      expect(await jobs.runTreeTask(rowTasks.changedRows, { ...c.sources, always })).toEqual(changedRows({ ...c.sources, always }));
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe('ManifestIndex', () => {
  it('finds every entry of a manifest, and nothing for paths it does not hold', () => {
    const dir = path.join(tmp, 'index');
    const src = path.join(dir, 'src');
    fs.mkdirSync(src, { recursive: true });
    // Enough entries for several 64 KiB blocks, names of unequal length, a non-ASCII one.
    for (let i = 0; i < 40; i++) {
      const d = path.join(src, `d${i}`, i % 3 === 0 ? 'é' : 'sub');
      fs.mkdirSync(d, { recursive: true });
      for (let j = 0; j < 60; j++) fs.writeFileSync(path.join(d, `${'f'.repeat(1 + (j % 7))}${j}`), `${i}/${j}`);
    }
    const manifest = path.join(dir, 'm');
    fs.mkdirSync(path.join(dir, 'dst'));
    copyTree({ src, dst: path.join(dir, 'dst'), policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: manifest });
    expect(fs.statSync(manifest).size).toBeGreaterThan(4 << 16);
    const index = new ManifestIndex(manifest);
    try {
      for (const e of readManifest(manifest)) {
        expect(index.find(e.p)).toEqual(e);
        expect(index.find(`${e.p}~`)).toBeNull();
        expect(index.find(`${e.p}/zz`)).toBeNull();
      }
      expect(index.find('a')).toBeNull();
      expect(index.find('zzz')).toBeNull();
    } finally {
      index.close();
    }
  });
});
