import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/index.js';
import { buildTree } from '../../src/testing/index.js';
import { mountXfsReflink, unmount, usedBytes, whyNotMount } from './mounts.js';

/**
 * On XFS made with reflink=1, staging with the reflink policy shares blocks with the
 * booted tree: the filesystem's used space grows by far less than the tree's size
 * (while writing the same bytes anew, for contrast, takes about their size).
 */
const skip = whyNotMount('xfs');
if (skip) console.warn(`SKIPPED reflink tests: ${skip}`);

const MiB = 1 << 20;
const TREE_BYTES = 24 * MiB;

describe.skipIf(skip !== null)('reflinks on XFS (reflink=1)', () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-reflink-'));
  const mnt = path.join(base, 'mnt');
  let sysroot: Sysroot;

  beforeAll(async () => {
    const tree: Record<string, Buffer> = {};
    for (let i = 0; i < 24; i++) tree[`${i % 2 ? 'usr/lib' : 'etc'}/blob${i}.bin`] = Buffer.alloc(MiB, i + 1);
    const src = buildTree(path.join(base, 'src'), tree);
    mountXfsReflink(mnt, path.join(base, 'xfs.img'));
    // Built from a directory on another filesystem: a real copy on XFS.
    sysroot = await Sysroot.init(path.join(mnt, 'sysroot'), { fromDirectory: src });
  }, 120_000);
  afterAll(() => {
    unmount(mnt);
    fs.rmSync(base, { recursive: true, force: true });
  });

  const stageAndMeasure = async (mode: 'reflink') => {
    const before = usedBytes(mnt);
    const r = await sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello\n' }] }, { copyPolicy: { hardlinkPrefixes: [], mode } });
    const grown = usedBytes(mnt) - before;
    // Copies, not hardlinks: each file has its own inode.
    const st = fs.statSync(path.join(r.path, 'usr/lib/blob1.bin'));
    expect(st.nlink).toBe(1);
    expect(st.ino).not.toBe(fs.statSync(path.join(sysroot.treePath('0001'), 'usr/lib/blob1.bin')).ino);
    expect(sysroot.verify(r.id).drift).toEqual([]);
    await sysroot.discardStaged();
    return grown;
  };

  it('shares blocks: used space grows by far less than the tree', async () => {
    const grown = await stageAndMeasure('reflink');
    console.log(`reflink stage of a ${TREE_BYTES / MiB} MiB tree: used space grew by ${(grown / MiB).toFixed(2)} MiB`);
    expect(grown).toBeLessThan(TREE_BYTES * 0.1);
  });

  it('the measurement sees real writes: the same bytes written anew take their size', () => {
    // (A 'copy' policy is no contrast here: libuv copies with copy_file_range, which XFS
    // itself turns into a reflink.)
    const before = usedBytes(mnt);
    const dir = path.join(mnt, 'plain');
    fs.mkdirSync(dir);
    for (let i = 0; i < 24; i++) fs.writeFileSync(path.join(dir, `blob${i}.bin`), Buffer.alloc(MiB, i + 1));
    const grown = usedBytes(mnt) - before;
    console.log(`writing the same ${TREE_BYTES / MiB} MiB anew: used space grew by ${(grown / MiB).toFixed(2)} MiB`);
    expect(grown).toBeGreaterThan(TREE_BYTES * 0.9);
    fs.rmSync(dir, { recursive: true });
  });
});
