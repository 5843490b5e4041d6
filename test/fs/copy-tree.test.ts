import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { copyTree } from '../../src/fs/copy-tree.js';
import { buildTree, hashTree } from '../../src/testing/index.js';

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

describe('copyTree', () => {
  it.each(['copy', 'reflink'] as const)('with mode %s: the same bytes, modes and times in new inodes (usr/ hardlinked)', (mode) => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-copy-tree-'));
    // Bigger than the 1 MiB buffer of a plain copy, an empty file, and a private mode.
    const big = Buffer.alloc(2.5 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
    const src = buildTree(path.join(base, 'src'), {
      'usr/bin/tool': { content: '#!/bin/sh\n', mode: 0o755 },
      'var/big.bin': big,
      'etc/empty': '',
      'etc/secret': { content: 'key\n', mode: 0o600 },
    });
    fs.utimesSync(path.join(src, 'var/big.bin'), 1_000_000, 1_000_000);
    const dst = path.join(base, 'dst');
    fs.mkdirSync(dst);
    const r = copyTree({ src, dst, policy: { hardlinkPrefixes: ['usr'], mode }, manifestOut: path.join(base, 'manifest.ndjson') });
    expect(hashTree(dst)).toBe(hashTree(src));
    expect(r).toMatchObject({ hardlinked: 1, copied: 3 });
    const ino = (root: string, p: string): number => fs.statSync(path.join(root, p)).ino;
    expect(ino(dst, 'usr/bin/tool')).toBe(ino(src, 'usr/bin/tool'));
    for (const p of ['var/big.bin', 'etc/empty', 'etc/secret']) expect(ino(dst, p), p).not.toBe(ino(src, p));
    expect(fs.statSync(path.join(dst, 'var/big.bin')).mtimeMs).toBe(1_000_000_000);
  });
});
