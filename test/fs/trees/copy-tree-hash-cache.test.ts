import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copyTree } from '../../../src/fs/trees/copy-tree.js';
import { readManifest } from '../../../src/fs/manifests/manifest.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-copytree-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('copyTree hash cache', () => {
  it('reuses every hash when copying a tree that was itself copied (no re-hash after init)', () => {
    const src = path.join(dir, 'src');
    for (let i = 0; i < 200; i++) {
      const p = path.join(src, `d${i % 7}`, `f${i}`);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, `file ${i}\n`);
      // Sub-millisecond mtimes are what utimes rounds: give each file a different one.
      fs.utimesSync(p, 1_700_000_000 + i / 7, 1_700_000_000 + i / 3);
    }
    const policy = { hardlinkPrefixes: [], mode: 'copy' as const };
    fs.mkdirSync(path.join(dir, 'a/tree'), { recursive: true });
    const first = copyTree({ src, dst: path.join(dir, 'a/tree'), policy, manifestOut: path.join(dir, 'a/manifest.ndjson') });
    expect(first.hashed).toBe(200);
    fs.mkdirSync(path.join(dir, 'b/tree'), { recursive: true });
    const second = copyTree({ src: path.join(dir, 'a/tree'), dst: path.join(dir, 'b/tree'), policy, srcManifest: path.join(dir, 'a/manifest.ndjson'), manifestOut: path.join(dir, 'b/manifest.ndjson') });
    expect(second.hashed).toBe(0);
    // Each manifest's mtimes are those of its own tree.
    for (const e of readManifest(path.join(dir, 'b/manifest.ndjson'))) {
      if (e.t === 'f') expect(e.mt).toBe(Math.trunc(fs.lstatSync(path.join(dir, 'b/tree', e.p)).mtimeMs));
    }
  });
});
