import * as fs from 'node:fs';
import * as path from 'node:path';
import { Sysroot } from '../../src/index.js';
import { hashTree } from '../../src/testing/index.js';

/**
 * The crash-safety invariants of DESIGN.md, checked from outside: opens (and so
 * recovers) the sysroot, then lists every violation. Empty means: exactly one current
 * deployment, the `current` pointer agrees with the state, every ready deployment
 * (current, staged, rollback...) verifies against its manifest, and no leftovers of
 * interrupted work remain (work/, trash/, unrecorded trees, temp files, the lock).
 */
export async function invariantViolations(dir: string): Promise<{ violations: string[]; recovery: string[]; sysroot: Sysroot }> {
  const sysroot = await Sysroot.open(dir);
  const v: string[] = [];
  const st = sysroot.status();
  const ids = st.deployments.map((d) => d.id);
  const currents = st.deployments.filter((d) => d.current);
  if (currents.length !== 1 || currents[0]!.id !== st.current) v.push(`expected exactly one current deployment, got ${JSON.stringify(currents.map((d) => d.id))} (state says ${st.current})`);
  const link = fs.readlinkSync(path.join(dir, 'current'));
  if (link !== `deploy/${st.current}/tree`) v.push(`the current pointer is ${link}, the state says ${st.current}`);
  const cur = st.deployments.find((d) => d.id === st.current);
  if (cur && cur.status !== 'ready') v.push(`current deployment ${st.current} is ${cur.status}`);
  if (st.staged !== null && st.deployments.find((d) => d.id === st.staged)?.status !== 'ready') v.push(`staged deployment ${st.staged} is not ready`);
  for (const d of st.deployments) {
    if (d.status !== 'ready') continue;
    let drift;
    try {
      drift = sysroot.verify(d.id).drift;
    } catch (err) {
      v.push(`deployment ${d.id} cannot be verified: ${(err as Error).message}`);
      continue;
    }
    if (drift.length > 0) v.push(`deployment ${d.id} (${[d.current && 'current', d.staged && 'staged', d.rollback && 'rollback', d.booted && 'booted'].filter(Boolean).join(', ') || 'old'}) is torn: ${JSON.stringify(drift.slice(0, 3))}`);
  }
  const list = (p: string): string[] => (fs.existsSync(p) ? fs.readdirSync(p).sort() : []);
  const deployDirs = list(path.join(dir, 'deploy'));
  if (JSON.stringify(deployDirs) !== JSON.stringify([...ids].sort())) v.push(`deploy/ holds ${JSON.stringify(deployDirs)}, the state records ${JSON.stringify([...ids].sort())}`);
  for (const sub of ['work', 'trash']) if (list(path.join(dir, sub)).length > 0) v.push(`leftovers in ${sub}/: ${list(path.join(dir, sub)).join(', ')}`);
  const temps = list(dir).filter((n) => n.startsWith('.') || n === 'lock' || n === 'lock.break');
  if (temps.length > 0) v.push(`leftover temp files or lock: ${temps.join(', ')}`);
  return { violations: v, recovery: sysroot.recovery, sysroot };
}

/** The trees an operation must never write (booted, current, rollback): their hashes, and which are good. */
export function protectedTrees(sysroot: Sysroot): Map<string, { hash: string; good: boolean }> {
  const st = sysroot.status();
  const out = new Map<string, { hash: string; good: boolean }>();
  for (const id of [st.booted, st.current, st.rollback]) {
    if (id !== null && !out.has(id)) out.set(id, { hash: hashTree(sysroot.treePath(id)), good: st.deployments.find((d) => d.id === id)!.good });
  }
  return out;
}

/** Violations against `before`: a protected tree that changed, a good one that is gone. */
export function protectedTreeViolations(sysroot: Sysroot, before: Map<string, { hash: string; good: boolean }>): string[] {
  const ids = new Set(sysroot.status().deployments.map((d) => d.id));
  const v: string[] = [];
  for (const [id, b] of before) {
    if (!ids.has(id)) {
      if (b.good) v.push(`good deployment ${id} (booted, current or rollback before) is gone`);
    } else if (hashTree(sysroot.treePath(id)) !== b.hash) {
      v.push(`the tree of deployment ${id} (booted, current or rollback) was written`);
    }
  }
  return v;
}

/** A small tree in the shape of a root: many small files in usr/, a few configs in etc/. */
export function smallRootTree(files = 40): Record<string, string> {
  const t: Record<string, string> = { 'etc/os-release': 'ID=test\n', 'etc/hostname': 'node\n' };
  for (let i = 0; i < files; i++) t[`usr/lib/pkg${i % 9}/sub${i % 4}/f${i}.txt`] = `file ${i}\n`.repeat(1 + (i % 50));
  for (let i = 0; i < 10; i++) t[`etc/app${i}.conf`] = `key=${i}\n`;
  return t;
}

/** A native update spec changing, adding and removing a few files of smallRootTree. */
export function smallUpdateSpec(tag: string): object {
  return {
    version: 1,
    label: `update-${tag}`,
    files: [
      ...Array.from({ length: 8 }, (_, i) => ({ path: `/usr/lib/pkg${i % 9}/sub${i % 4}/f${i}.txt`, contents: `changed ${tag} ${i}\n`.repeat(20) })),
      ...Array.from({ length: 4 }, (_, i) => ({ path: `/usr/share/new-${tag}/n${i}.txt`, contents: `new ${tag} ${i}\n` })),
      { path: '/etc/app1.conf', contents: `key=${tag}\n`, mode: '0640' },
    ],
    remove: [{ path: '/etc/app9.conf', missingOk: true }],
  };
}
