/**
 * A copy split into parts (src/fs/trees/copy-split.ts) gives the tree and the manifest one
 * copy gives: the parts' manifests read in order are that manifest, the directories the
 * parts share get their modes and times, and files linked to each other across two
 * parts stay one inode.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyTree } from '../../../src/fs/trees/copy-tree.js';
import { copyTreeSplit, splitPoints } from '../../../src/fs/trees/copy-split.js';
import { readManifest } from '../../../src/fs/manifests/manifest.js';
import { patchManifest } from '../../../src/fs/manifests/patch-manifest.js';
import { keylessEntries } from '../../helpers/manifest.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';

let base: string;
let src: string;
let srcManifest: string;
const policy = { hardlinkPrefixes: ['usr'], mode: 'reflink' as const };


beforeAll(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-copy-split-'));
  const spec: Record<string, string | { content: string; mode: number } | { symlink: string }> = {
    'etc/hostname': 'node\n',
    'etc/ssh/key': { content: 'secret\n', mode: 0o600 },
    'var/lib/a/data': 'shared inode\n',
    bin: { symlink: 'usr/bin' },
  };
  for (let i = 0; i < 600; i++) spec[`usr/lib/pkg${i % 30}/sub${i % 3}/f${i}`] = `file ${i}\n`;
  src = buildTree(path.join(base, 'src'), spec);
  // One inode under two names in two parts' ranges (outside usr/: copied, not linked to the source).
  fs.linkSync(path.join(src, 'etc/hostname'), path.join(src, 'var/lib/hostname-link'));
  fs.chmodSync(path.join(src, 'usr/lib'), 0o750);
  fs.utimesSync(path.join(src, 'usr/lib'), 1_000_000, 1_000_000);
  const first = path.join(base, 'first');
  fs.mkdirSync(first);
  srcManifest = path.join(base, 'src.manifest');
  copyTree({ src, dst: first, policy, manifestOut: srcManifest });
});

afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

describe('copyTreeSplit', () => {
  it('cuts the manifest at whole lines, in order', () => {
    const points = splitPoints(srcManifest, 4);
    expect(points.length).toBe(3);
    const paths = [...readManifest(srcManifest)].map((e) => e.p);
    for (const p of points) expect(paths).toContain(p.path);
    expect(points.map((p) => paths.indexOf(p.path))).toEqual([...points.map((p) => paths.indexOf(p.path))].sort((a, b) => a - b));
  });

  it('cuts by cost: a region the copy copies weighs more than one it links, so the cut moves towards it', () => {
    const file = path.join(base, 'weighted.manifest');
    const lines: string[] = [];
    const line = (p: string): string => JSON.stringify({ p, t: 'f', m: 420, u: 0, g: 0, s: 1, h: 'ab'.repeat(32), mt: 1 });
    lines.push(JSON.stringify({ p: 'etc', t: 'd', m: 493, u: 0, g: 0 }));
    for (let i = 0; i < 1000; i++) lines.push(line(`etc/f${String(i).padStart(4, '0')}`));
    lines.push(JSON.stringify({ p: 'usr', t: 'd', m: 493, u: 0, g: 0 }));
    for (let i = 0; i < 9000; i++) lines.push(line(`usr/f${String(i).padStart(4, '0')}`));
    fs.writeFileSync(file, lines.join('\n') + '\n');
    const size = fs.statSync(file).size;
    // By bytes: the middle of usr/. Weighted (etc/ 8 times a usr/ line): 10 % × 8 + 90 % × 1 = 170 %; half of it,
    // 85 %, is reached 5 % into usr/, at about 15 % of the bytes.
    const even = splitPoints(file, 2);
    expect(even[0]!.offset / size).toBeCloseTo(0.5, 1);
    const weighted = splitPoints(file, 2, (p) => (p.startsWith('usr/') ? 1 : 8));
    expect(weighted).toHaveLength(1);
    expect(weighted[0]!.path.startsWith('usr/')).toBe(true);
    expect(weighted[0]!.offset / size).toBeGreaterThan(0.1);
    expect(weighted[0]!.offset / size).toBeLessThan(0.2);
    expect(lines.slice(0, lines.indexOf(line(weighted[0]!.path))).join('\n').length + 1).toBe(weighted[0]!.offset);
  });

  it.each([2, 3, 5])('in %i parts: the same tree and manifest as one copy', async (parts) => {
    const one = path.join(base, `one-${parts}`);
    const split = path.join(base, `split-${parts}`);
    fs.mkdirSync(one);
    fs.mkdirSync(split);
    const oneManifest = path.join(base, `one-${parts}.manifest`);
    const r1 = copyTree({ src, dst: one, policy, srcManifest, manifestOut: oneManifest });
    const progress: number[] = [];
    const { result, manifests } = await copyTreeSplit({ src, dst: split, policy, srcManifest, manifestOut: path.join(base, `split-${parts}.manifest`), total: r1.entries }, parts, { onProgress: (p: { done: number }) => progress.push(p.done) });
    expect(manifests.length).toBe(parts);
    // (`copied` may count a file of two names twice: each part copied it before the relink.)
    expect(result).toMatchObject({ entries: r1.entries, bytes: r1.bytes, hardlinked: r1.hardlinked });
    expect(progress.at(-1)).toBe(r1.entries);
    expect(hashTree(split)).toBe(hashTree(one));
    // The parts' manifests, read in order (as the stage's manifest pass reads them), are one copy's manifest.
    const merged = path.join(base, `merged-${parts}.manifest`);
    patchManifest(split, manifests, merged, []);
    expect(keylessEntries(merged)).toEqual(keylessEntries(oneManifest));
    // Shared directories finished: mode and mtime from the source.
    const st = fs.statSync(path.join(split, 'usr/lib'));
    expect(st.mode & 0o7777).toBe(0o750);
    expect(st.mtimeMs).toBe(1_000_000_000);
    // One inode across parts, as one copy makes it.
    expect(fs.statSync(path.join(split, 'var/lib/hostname-link')).ino).toBe(fs.statSync(path.join(split, 'etc/hostname')).ino);
    expect(fs.statSync(path.join(split, 'usr/lib/pkg0/sub0/f0')).ino).toBe(fs.statSync(path.join(src, 'usr/lib/pkg0/sub0/f0')).ino);
  });
});
