/**
 * The checks of invariants 1 and 3 (docs/invariants.md) on a sysroot after a crash, shared by the
 * crash-point, kill and concurrency tests.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expect } from 'vitest';
import type { Sysroot } from '../../src/sysroot.js';
import { Layout } from '../../src/state/layout.js';
import { stateViolations } from '../../src/state/invariants.js';
import { bootFiles, effectiveState } from '../../src/state/model.js';
import type { BaseState } from '../../src/state/schema.js';
import { loadState } from '../../src/store/state-file.js';
import { hashTree } from '../../src/testing/index.js';
import { verifyTree, type Drift } from '../../src/fs/manifests/verify-tree.js';
import { manifestDigest } from '../../src/fs/manifests/manifest-overlay.js';

/** What may be at the top of a sysroot when no writer runs (no lock, no temp files). */
export const ALLOWED_ROOT_ENTRIES = new Set(['state.json', 'state.json.bak', 'current', 'deploy', 'work', 'trash', 'shared', 'shared.list', 'kept', 'boot-tries', 'fallback', 'rollback', 'boot-entries.json', 'live-undo', 'layers']);

/** The state a reader sees, without recovering anything. */
export function readState(dir: string): BaseState {
  const layout = new Layout(dir);
  return effectiveState(loadState(layout).state, layout.idFromLink(fs.readlinkSync(layout.currentLink)));
}

/** Before recovery: the state parses, and what a boot would follow (the symlink) is that state's current tree. */
export function expectReadable(dir: string, where: string): BaseState {
  const seen = readState(dir);
  expect(fs.readlinkSync(path.join(dir, 'current')), `${where}: before recovery`).toBe(`deploy/${seen.current}/tree`);
  expect(fs.statSync(path.join(dir, 'current')).isDirectory(), `${where}: before recovery`).toBe(true);
  return seen;
}

/** What `verify` reports, computed in place (the same check, without its worker thread: these helpers are synchronous). */
function verifySync(s: Sysroot, id: string): Drift[] {
  return verifyTree(s.treePath(id), new Layout(s.path).manifest(id));
}

/**
 * A hash of a tree like hashTree, leaving out the subtrees `exclude` names: where a test
 * edits the booted tree as the running system would (etc), and where finalize's merge
 * completes a staged tree.
 */
export function hashTreeOutside(dir: string, exclude: readonly string[] = []): string {
  return hashTree(dir, { exclude });
}

/** Hashes of every deployment tree (to show later that none was written into), outside `exclude`. */
export function hashDeployments(s: Sysroot, exclude: readonly string[] = []): Map<string, string> {
  return new Map(s.state().deployments.map((d) => [d.id, hashTreeOutside(s.treePath(d.id), exclude)] as const));
}

/**
 * Invariant 3 (docs/invariants.md) on a sysroot that `open` recovered: exactly one current
 * deployment, the symlink resolves to its tree and it verifies; the staged deployment is
 * absent or complete; every ready deployment verifies (no torn tree); no leftovers
 * (work/, trash/, temp files, unrecorded deployment dirs, the lock); the booted
 * deployment exists. With `treeHashes`, invariant 1 too: no deployment that existed
 * before was written into. `localEdits`: tree paths (etc) the test edited in those
 * deployments while they ran, as the running system would: their drift there is
 * expected, and trees are compared outside them (finalize's merge completes the staged
 * tree there).
 */
/** Where a test edited deployments' trees as the running system would: these paths of these deployments. */
export interface LocalEdits {
  paths: readonly string[];
  ids: ReadonlySet<string>;
}

/** The deployments a crash-child's `edit-local` edited in the sysroot `dir` (it notes them beside it). */
export function editedDeployments(dir: string): Set<string> {
  const f = `${dir}.local-edits`;
  return new Set(fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').filter(Boolean) : []);
}

export function expectConsistent(sysroot: Sysroot, dir: string, where: string, treeHashes?: Map<string, string>, o: { localEdits?: LocalEdits } = {}): BaseState {
  const state = sysroot.state();
  const status = sysroot.status();

  // The cross-record rules the writer checks before every state write (src/state/invariants.ts).
  expect(stateViolations(state), where).toEqual([]);

  expect(status.deployments.filter((d) => d.current).map((d) => d.id), where).toEqual([state.current]);
  expect(fs.readlinkSync(path.join(dir, 'current')), where).toBe(`deploy/${state.current}/tree`);
  expect(fs.realpathSync(path.join(dir, 'current')), where).toBe(fs.realpathSync(sysroot.treePath(state.current)));
  // The booted tree is the running system's root: the local edits a test made there are
  // its drift (what the merge carries), not a torn tree.
  const local = (id: string, p: string): boolean => (o.localEdits?.ids.has(id) ?? false) && o.localEdits!.paths.some((e) => p === e || p.startsWith(`${e}/`));
  expect(verifySync(sysroot, state.current).filter((x) => !local(state.current, x.path)), `${where}: current ${state.current}`).toEqual([]);

  if (state.staged !== null) expect(state.deployments.find((d) => d.id === state.staged)?.status, where).toBe('ready');
  // The checksum the state records is the manifest's as readers see it (its overlay included).
  const layout = new Layout(sysroot.path);
  for (const d of state.deployments.filter((x) => x.status === 'ready' && x.manifestSha256 !== null)) {
    expect(manifestDigest(layout.manifest(d.id)), `${where}: the manifest of ${d.id} is the one its record names`).toBe(d.manifestSha256);
  }
  for (const d of state.deployments.filter((x) => x.status === 'ready')) {
    expect(verifySync(sysroot, d.id).filter((x) => !local(d.id, x.path)), `${where}: deployment ${d.id}`).toEqual([]);
  }

  const rootEntries = fs.readdirSync(dir);
  expect(rootEntries.filter((e) => !ALLOWED_ROOT_ENTRIES.has(e)), `${where}: leftovers at the top of the sysroot`).toEqual([]);
  for (const sub of ['work', 'trash']) {
    const sd = path.join(dir, sub);
    if (fs.existsSync(sd)) expect(fs.readdirSync(sd), `${where}: ${sub}/`).toEqual([]);
  }
  // Kept copies of a finalize that never committed are leftovers too.
  const kept = path.join(dir, 'kept');
  if (fs.existsSync(kept)) expect(fs.readdirSync(kept).filter((n) => n.endsWith('.partial')), `${where}: kept/`).toEqual([]);
  // Kept copies live as long as their deployment: none of one that is gone.
  const recorded = new Set(state.deployments.map((d) => d.id));
  if (fs.existsSync(kept)) expect(fs.readdirSync(kept).filter((n) => !n.endsWith('.partial') && !recorded.has(n)), `${where}: kept/ of removed deployments`).toEqual([]);
  // A live apply's before-images are kept for the tree it wrote into, and live no longer than it (no half-removed one).
  const undo = path.join(dir, 'live-undo');
  if (fs.existsSync(undo)) {
    for (const id of fs.readdirSync(undo)) {
      expect(recorded.has(id), `${where}: live-undo/${id} of a removed deployment`).toBe(true);
      for (const n of fs.readdirSync(path.join(undo, id))) expect(fs.existsSync(path.join(undo, id, n, 'journal.json')), `${where}: live-undo/${id}/${n} holds its journal`).toBe(true);
    }
  }
  for (const d of state.deployments) expect(fs.existsSync(path.join(dir, 'deploy', d.id, 'merging.json')), `${where}: merge marker of ${d.id}`).toBe(false);
  expect(fs.readdirSync(path.join(dir, 'deploy')).sort(), `${where}: deploy/ holds exactly the recorded deployments`).toEqual(state.deployments.map((d) => d.id).sort());

  expectBootFiles(dir, state, where);

  expect(state.booted, where).not.toBeNull();
  expect(state.deployments.map((d) => d.id), `${where}: booted ${state.booted} is recorded`).toContain(state.booted);
  if (treeHashes) {
    for (const d of state.deployments) {
      const h = treeHashes.get(d.id);
      if (h !== undefined) expect(hashTreeOutside(sysroot.treePath(d.id), o.localEdits?.paths), `${where}: tree of ${d.id} changed`).toBe(h);
    }
  }
  return state;
}

/**
 * The files the initramfs reads agree with the state: boot-tries/ holds exactly the
 * current deployment's file while it is under assessment (a count no higher than the
 * state's), and `fallback` points at the deployment the state would fall back to.
 */
export function expectBootFiles(dir: string, state: BaseState, where: string): void {
  const want = bootFiles(state);
  const triesDir = path.join(dir, 'boot-tries');
  const names = fs.existsSync(triesDir) ? fs.readdirSync(triesDir) : [];
  expect(names, `${where}: boot-tries/`).toEqual(want.tries ? [want.tries.id] : []);
  if (want.tries) {
    const left = fs.readFileSync(path.join(triesDir, want.tries.id), 'utf8');
    expect(left, `${where}: boot-tries/${want.tries.id}`).toMatch(/^\d+\n$/);
    expect(Number(left), `${where}: boot-tries/${want.tries.id}`).toBeLessThanOrEqual(want.tries.left);
  }
  const link = path.join(dir, 'fallback');
  expect(fs.existsSync(link) || isLink(link) ? fs.readlinkSync(link) : null, `${where}: fallback`).toBe(want.fallback === null ? null : `deploy/${want.fallback}/tree`);
  const rb = path.join(dir, 'rollback');
  expect(isLink(rb) ? fs.readlinkSync(rb) : null, `${where}: rollback`).toBe(want.rollback === null ? null : `deploy/${want.rollback}/tree`);
}

function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}
