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
import { effectiveState } from '../../src/state/model.js';
import type { BaseState } from '../../src/state/schema.js';
import { loadState } from '../../src/store/state-file.js';
import { hashTree } from '../../src/testing/index.js';
import { verifyTree, type Drift } from '../../src/fs/verify-tree.js';

/** What may be at the top of a sysroot when no writer runs (no lock, no temp files). */
export const ALLOWED_ROOT_ENTRIES = new Set(['state.json', 'state.json.bak', 'current', 'deploy', 'work', 'trash']);

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
  return verifyTree(s.treePath(id), s.ctx.layout.manifest(id));
}

/** Hashes of every deployment tree (to show later that none was written into). */
export function hashDeployments(s: Sysroot): Map<string, string> {
  return new Map(s.state().deployments.map((d) => [d.id, hashTree(s.treePath(d.id))] as const));
}

/**
 * Invariant 3 (docs/invariants.md) on a sysroot that `open` recovered: exactly one current
 * deployment, the symlink resolves to its tree and it verifies; the staged deployment is
 * absent or complete; every ready deployment verifies (no torn tree); no leftovers
 * (work/, trash/, temp files, unrecorded deployment dirs, the lock); the booted
 * deployment exists. With `treeHashes`, invariant 1 too: no deployment that existed
 * before was written into.
 */
export function expectConsistent(sysroot: Sysroot, dir: string, where: string, treeHashes?: Map<string, string>): BaseState {
  const state = sysroot.state();
  const status = sysroot.status();

  // The cross-record rules the writer checks before every state write (src/state/invariants.ts).
  expect(stateViolations(state), where).toEqual([]);

  expect(status.deployments.filter((d) => d.current).map((d) => d.id), where).toEqual([state.current]);
  expect(fs.readlinkSync(path.join(dir, 'current')), where).toBe(`deploy/${state.current}/tree`);
  expect(fs.realpathSync(path.join(dir, 'current')), where).toBe(fs.realpathSync(sysroot.treePath(state.current)));
  expect(verifySync(sysroot, state.current), `${where}: current ${state.current}`).toEqual([]);

  if (state.staged !== null) expect(state.deployments.find((d) => d.id === state.staged)?.status, where).toBe('ready');
  for (const d of state.deployments.filter((x) => x.status === 'ready')) {
    expect(verifySync(sysroot, d.id), `${where}: deployment ${d.id}`).toEqual([]);
  }

  const rootEntries = fs.readdirSync(dir);
  expect(rootEntries.filter((e) => !ALLOWED_ROOT_ENTRIES.has(e)), `${where}: leftovers at the top of the sysroot`).toEqual([]);
  for (const sub of ['work', 'trash']) {
    const sd = path.join(dir, sub);
    if (fs.existsSync(sd)) expect(fs.readdirSync(sd), `${where}: ${sub}/`).toEqual([]);
  }
  expect(fs.readdirSync(path.join(dir, 'deploy')).sort(), `${where}: deploy/ holds exactly the recorded deployments`).toEqual(state.deployments.map((d) => d.id).sort());

  expect(state.booted, where).not.toBeNull();
  expect(state.deployments.map((d) => d.id), `${where}: booted ${state.booted} is recorded`).toContain(state.booted);
  if (treeHashes) {
    for (const d of state.deployments) {
      const h = treeHashes.get(d.id);
      if (h !== undefined) expect(hashTree(sysroot.treePath(d.id)), `${where}: tree of ${d.id} changed`).toBe(h);
    }
  }
  return state;
}
