/**
 * Reflinks: on an XFS filesystem made with `reflink=1` (a file-backed loop device),
 * staging with the reflink policy shares the blocks of the copied part of the tree with
 * the booted deployment: the filesystem's used space grows by far less than the tree's
 * size. The same stage with the copy policy grows it by about the tree's size, which
 * shows that the measurement sees real copies. Needs root, mkfs.xfs (xfsprogs) and a
 * loop device; skips with the reason otherwise.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execaSync } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { buildTree, type TreeSpec } from '../../src/testing/index.js';
import { expectConsistent } from '../helpers/invariants.js';
import { mountXfsLoop, whyNoXfsLoop, type XfsLoop } from '../helpers/mounts.js';

const MIB = 1024 * 1024;
/** 64 MiB in four files outside usr/ (the part a stage copies or reflinks), and a few small ones. */
const BIG_FILES = 4;
const BIG_SIZE = 16 * MIB;
const TREE_BYTES = BIG_FILES * BIG_SIZE;

/** Why an XFS loop mount cannot be made here, or null when it can (checked for real in beforeAll). */
const cannotMount = whyNoXfsLoop();
if (cannotMount) console.warn(`SKIPPED the reflink tests (test/reliability/reflink.test.ts): ${cannotMount}`);

/** Bytes in use on the filesystem holding `p` (statfs: blocks minus free blocks). */
function usedBytes(p: string): number {
  execaSync('sync', ['-f', p]);
  const s = fs.statfsSync(p);
  return (s.blocks - s.bfree) * s.bsize;
}

const mib = (n: number): string => `${(n / MIB).toFixed(2)} MiB`;

describe.skipIf(cannotMount !== null)('reflinks on an XFS loop mount (reflink=1)', () => {
  let xfs: XfsLoop | undefined;
  let sysroot: Sysroot;
  let dir: string;

  beforeAll(async () => {
    xfs = mountXfsLoop('stagedroot-reflink-');
    const mnt = xfs.mnt;

    const spec: TreeSpec = {
      'usr/bin/tool': { content: '#!/bin/sh\necho tool\n', mode: 0o755 },
      'etc/hostname': 'node-1\n',
      'etc/motd': 'welcome\n',
    };
    // Distinct content per file and per block, so that nothing could be shared by accident.
    for (let i = 0; i < BIG_FILES; i++) {
      const b = Buffer.alloc(BIG_SIZE);
      for (let off = 0; off < BIG_SIZE; off += 4096) b.writeUInt32LE(i * BIG_SIZE + off, off);
      spec[`var/lib/images/disk${i}.img`] = b;
    }
    // Built off the mount, so that the deployment's blocks are its own (as a real first tree's are).
    const tree = buildTree(fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-reflink-tree-')), spec);
    dir = path.join(mnt, 'sysroot');
    sysroot = await Sysroot.init(dir, { fromDirectory: tree, shared: [] }); // no shared /var: the images are part of the copied tree
    fs.rmSync(tree, { recursive: true, force: true });
  }, 120_000);

  afterAll(() => xfs?.cleanup());

  it(`a stage with the reflink policy shares the blocks of ${mib(TREE_BYTES)} of copied files; with the copy policy it takes their size`, async () => {
    const before = usedBytes(dir);
    const reflinked = await sysroot.stage(
      { label: 'reflinked', files: [{ path: '/etc/motd', contents: 'reflinked\n' }] },
      { copyPolicy: { hardlinkPrefixes: [], mode: 'reflink' } },
    );
    const reflinkGrowth = usedBytes(dir) - before;
    expect((await sysroot.verify(reflinked.id)).drift).toEqual([]);
    // Not hardlinks: separate inodes, which a later change could modify without touching the booted tree.
    const booted = sysroot.treePath(sysroot.status().booted!);
    expect(fs.statSync(path.join(reflinked.path, 'var/lib/images/disk0.img')).ino).not.toBe(fs.statSync(path.join(booted, 'var/lib/images/disk0.img')).ino);
    await sysroot.discardStaged();

    const beforeCopy = usedBytes(dir);
    const copied = await sysroot.stage(
      { label: 'copied', files: [{ path: '/etc/motd', contents: 'copied\n' }] },
      { copyPolicy: { hardlinkPrefixes: [], mode: 'copy' } },
    );
    const copyGrowth = usedBytes(dir) - beforeCopy;
    expect((await sysroot.verify(copied.id)).drift).toEqual([]);

    console.log(`reflink (XFS, reflink=1): a stage of a tree of ${mib(TREE_BYTES)} in ${BIG_FILES} files grew the used space by ${mib(reflinkGrowth)} (${reflinkGrowth} bytes) with the reflink policy, by ${mib(copyGrowth)} (${copyGrowth} bytes) with the copy policy`);
    expect(reflinkGrowth).toBeLessThan(TREE_BYTES / 10);
    expect(copyGrowth).toBeGreaterThan(TREE_BYTES * 0.95);
    expect(copyGrowth).toBeLessThan(TREE_BYTES * 1.25);
    expectConsistent(sysroot, dir, 'after the reflink and copy stages');
  }, 120_000);
});
