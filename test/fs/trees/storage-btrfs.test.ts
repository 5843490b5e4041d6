/**
 * btrfs storage (src/fs/trees/storage.ts): on a btrfs loop mount, deployment trees are
 * subvolumes, a stage snapshots the booted one and builds the manifest from the base
 * manifest (walking only what is outside usr/), prune deletes subvolumes, and the
 * portable path can be forced. Needs root, mkfs.btrfs and btrfs (btrfs-progs) and a
 * loop device; skips loudly with the reason otherwise.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSubvolume } from '../../../src/fs/trees/storage.js';
import { verifyTree } from '../../../src/fs/manifests/verify-tree.js';
import { Sysroot } from '../../../src/sysroot.js';
import { buildTree, hashTree, reboot } from '../../../src/testing/index.js';
import { keylessEntries } from '../../helpers/manifest.js';
import { loopMount, type LoopMount } from '../../helpers/mounts.js';
import { BASE_TREE } from '../../helpers/trees.js';

const mount = spawnSync('btrfs', ['--version']).status === 0 ? loopMount('btrfs') : 'btrfs (btrfs-progs) is not installed';
if (typeof mount === 'string') console.warn(`SKIPPED btrfs storage tests: ${mount}`);
const m = typeof mount === 'string' ? null : (mount as LoopMount);
afterAll(() => m?.cleanup());

const UPDATE = {
  label: 'update',
  // Changes under usr/ (whose lines come from the base manifest) and outside it (walked).
  remove: ['/etc/old.conf', { path: '/usr/share/doc', recursive: true }],
  directories: [{ path: '/srv/www', mode: '0750' }],
  files: [
    { path: '/etc/motd', contents: 'updated motd\n' },
    { path: '/usr/lib/libx.so', contents: 'new lib\n', mode: '0755' },
    { path: '/usr/lib/new/deep/file', contents: 'added under usr\n' },
    { path: '/srv/www/index.html', contents: '<h1>hi</h1>\n' },
  ],
  symlinks: [{ path: '/etc/localtime', target: '/usr/share/zoneinfo/Europe/Paris' }],
};

/** A manifest's entries without the cache keys (a copy and a snapshot differ there only). */
const entries = keylessEntries;

let n = 0;
async function fresh(o: { storage?: 'auto' | 'portable' } = {}): Promise<{ s: Sysroot; dir: string }> {
  const base = path.join(m!.dir, `case-${++n}`);
  const tree = buildTree(path.join(base, 'initial'), { ...BASE_TREE, 'usr/share/doc/readme': 'doc\n', 'var/lib/state': 'x\n' });
  const dir = path.join(base, 'sysroot');
  return { s: await Sysroot.init(dir, { fromDirectory: tree, ...o }), dir };
}

describe.skipIf(m === null)('btrfs storage (loop mount)', () => {
  beforeAll(() => {
    expect(fs.statfsSync(m!.dir).type).toBe(0x9123683e);
  });

  it('each deployment tree is a subvolume; a stage snapshots the booted one and records the same manifest a copy records', async () => {
    const { s, dir } = await fresh();
    expect(s.status().storage).toBe('btrfs');
    expect(isSubvolume(s.treePath('0001'))).toBe(true);
    // A local change the running system made in etc/ before the stage: carried, and recorded.
    fs.writeFileSync(path.join(s.treePath('0001'), 'etc/hostname'), 'renamed\n');
    const r = await s.stage(UPDATE);
    expect(isSubvolume(r.path)).toBe(true);
    expect(verifyTree(r.path, path.join(dir, 'deploy', r.id, 'manifest.ndjson'))).toEqual([]);
    expect(fs.readFileSync(path.join(r.path, 'etc/hostname'), 'utf8')).toBe('renamed\n');
    expect(fs.readFileSync(path.join(r.path, 'usr/lib/libx.so'), 'utf8')).toBe('new lib\n');
    expect(fs.existsSync(path.join(r.path, 'etc/old.conf'))).toBe(false);
    expect(fs.readFileSync(path.join(s.treePath('0001'), 'usr/lib/libx.so'), 'utf8')).toBe('lib v1\n');

    // The same update through the portable path: the same tree and the same manifest.
    const snapshotHash = hashTree(r.path);
    const snapshotEntries = entries(path.join(dir, 'deploy', r.id, 'manifest.ndjson'));
    const p = await Sysroot.open(dir, { storage: 'portable' });
    await p.discardStaged();
    const q = await p.stage(UPDATE);
    expect(isSubvolume(q.path)).toBe(false);
    expect(hashTree(q.path)).toBe(snapshotHash);
    expect(entries(path.join(dir, 'deploy', q.id, 'manifest.ndjson'))).toEqual(snapshotEntries);
  });

  it('snapshots share no inode: a write into the new deployment\'s usr/ cannot reach the booted one', async () => {
    const { s } = await fresh();
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    const booted = path.join(s.treePath('0001'), 'usr/bin/tool');
    const staged = path.join(r.path, 'usr/bin/tool');
    expect(fs.statSync(staged).ino === fs.statSync(booted).ino && fs.statSync(staged).dev === fs.statSync(booted).dev).toBe(false);
    fs.appendFileSync(staged, 'written in place\n');
    expect(fs.readFileSync(booted, 'utf8')).toBe('#!/bin/sh\necho tool\n');
  });

  it('prune and discard delete the subvolumes; the lifecycle goes on', async () => {
    const { s, dir } = await fresh();
    for (const name of ['A', 'B', 'C']) {
      await s.stage({ label: name, files: [{ path: '/etc/motd', contents: `${name}\n` }] });
      await reboot(s);
      await s.markGood();
    }
    const before = s.status().deployments.map((d) => d.id);
    const { removed } = await s.prune({ keep: 1 });
    expect(removed.length).toBeGreaterThan(0);
    for (const id of removed) expect(fs.existsSync(path.join(dir, 'deploy', id))).toBe(false);
    const list = spawnSync('btrfs', ['subvolume', 'list', '-o', m!.dir], { encoding: 'utf8' }).stdout;
    for (const id of removed) expect(list).not.toContain(`${path.relative(m!.dir, dir)}/deploy/${id}/tree`);
    expect(s.status().deployments.map((d) => d.id)).toEqual(before.filter((id) => !removed.includes(id)));
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'D\n' }] });
    await s.discardStaged();
    expect(fs.existsSync(r.path)).toBe(false);
    expect(fs.readdirSync(path.join(dir, 'trash'))).toEqual([]);
  });

  it('storage: "portable" forces plain directories on btrfs, and status says so', async () => {
    const { s } = await fresh({ storage: 'portable' });
    expect(s.status().storage).toBe('portable');
    expect(isSubvolume(s.treePath('0001'))).toBe(false);
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    expect(isSubvolume(r.path)).toBe(false);
    // usr/ hardlinked, as on any filesystem.
    expect(fs.statSync(path.join(r.path, 'usr/bin/tool')).ino).toBe(fs.statSync(path.join(s.treePath('0001'), 'usr/bin/tool')).ino);
  });
});
