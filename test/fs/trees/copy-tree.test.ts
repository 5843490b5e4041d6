import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { copyTree, type CopyMode } from '../../../src/fs/trees/copy-tree.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';
import { mountXfsLoop, sharedExtentBytes, whyNoXfsLoop, type XfsLoop } from '../../helpers/mounts.js';

let base: string | undefined;
let xfs: XfsLoop | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
  base = undefined;
  try {
    xfs?.cleanup();
  } finally {
    xfs = undefined;
  }
});

const noXfs = whyNoXfsLoop();
if (noXfs) console.warn(`SKIPPED the reflink variant of test/fs/trees/copy-tree.test.ts (it needs an XFS loop mount with reflink=1): ${noXfs}`);

/** Copies a small tree under `dir` with `mode`; checks what both modes promise; returns both trees. */
function copyAndCheck(dir: string, mode: CopyMode): { src: string; dst: string } {
  // Bigger than the 1 MiB buffer of a plain copy, an empty file, and a private mode.
  const big = Buffer.alloc(2.5 * 1024 * 1024);
  for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
  const src = buildTree(path.join(dir, 'src'), {
    'usr/bin/tool': { content: '#!/bin/sh\n', mode: 0o755 },
    'var/big.bin': big,
    'etc/empty': '',
    'etc/secret': { content: 'key\n', mode: 0o600 },
  });
  fs.utimesSync(path.join(src, 'var/big.bin'), 1_000_000, 1_000_000);
  const dst = path.join(dir, 'dst');
  fs.mkdirSync(dst);
  const r = copyTree({ src, dst, policy: { hardlinkPrefixes: ['usr'], mode }, manifestOut: path.join(dir, 'manifest.ndjson') });
  expect(hashTree(dst)).toBe(hashTree(src));
  expect(r).toMatchObject({ hardlinked: 1, copied: 3 });
  const ino = (root: string, p: string): number => fs.statSync(path.join(root, p)).ino;
  expect(ino(dst, 'usr/bin/tool')).toBe(ino(src, 'usr/bin/tool'));
  for (const p of ['var/big.bin', 'etc/empty', 'etc/secret']) expect(ino(dst, p), p).not.toBe(ino(src, p));
  expect(fs.statSync(path.join(dst, 'var/big.bin')).mtimeMs).toBe(1_000_000_000);
  return { src, dst };
}

describe('copyTree', () => {
  it('with mode copy: the same bytes, modes and times in new inodes (usr/ hardlinked)', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-copy-tree-'));
    copyAndCheck(base, 'copy');
  });

  it.skipIf(noXfs !== null)('with mode reflink on XFS (reflink=1): the same bytes, modes and times, new inodes sharing their blocks (usr/ hardlinked)', () => {
    xfs = mountXfsLoop('stagedroot-copy-tree-xfs-');
    const { src, dst } = copyAndCheck(xfs.mnt, 'reflink');
    for (const p of ['var/big.bin', 'etc/secret']) {
      const { shared, total } = sharedExtentBytes(path.join(dst, p));
      expect(total, p).toBeGreaterThan(0);
      expect(shared, `${p}: every block shared with the source`).toBe(total);
      expect(sharedExtentBytes(path.join(src, p)).shared, p).toBe(total);
    }
    // The measurement can fail: a plain copy on the same filesystem shares nothing.
    const plain = path.join(xfs.mnt, 'plain');
    fs.mkdirSync(plain);
    const r = copyTree({ src, dst: plain, policy: { hardlinkPrefixes: ['usr'], mode: 'copy' }, manifestOut: path.join(xfs.mnt, 'plain.ndjson') });
    expect(r.copied).toBe(3);
    expect(sharedExtentBytes(path.join(plain, 'var/big.bin')).shared).toBe(0);
  });
});
