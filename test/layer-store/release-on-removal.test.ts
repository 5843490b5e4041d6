import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { makeTar, writeLayout, type GenEntry } from './helpers.js';

/** Removing deployments releases the store's layers only they used (prune, a superseded stage), not the others'. */
let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const layer = (name: string): GenEntry[] => [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'dir', path: 'usr/lib', mode: 0o755 },
  { type: 'file', path: `usr/lib/${name}.so`, content: `library ${name}\n` },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'file', path: 'etc/os-release', content: `ID=${name}\n` },
];
const layersIn = (dir: string): string[] => fs.readdirSync(path.join(dir, 'layers', 'diff', 'sha256')).sort();
const objectsIn = (dir: string): number => fs.readdirSync(path.join(dir, 'layers', 'objects')).reduce((n, kk) => n + fs.readdirSync(path.join(dir, 'layers', 'objects', kk)).length, 0);

describe('the layer store after deployments are removed', () => {
  it('a superseded stage and a prune release the layers only the removed deployments used', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const images = ['a', 'b', 'c', 'd'].map((n) => {
      const dir = path.join(t!.scratch, n);
      return { dir, diffId: writeLayout(dir, [{ tar: makeTar(layer(n)), gzip: true }])[0]!.diffId };
    });
    const first = await t.sysroot.stage(images[0]!.dir);
    await t.sysroot.finalize();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    await t.sysroot.markGood();
    const before = objectsIn(t.dir);
    // b staged, then superseded by c: b's deployment is dropped, its layer and objects with it.
    await t.sysroot.stage(images[1]!.dir);
    expect(layersIn(t.dir).length).toBe(2);
    await t.sysroot.stage(images[2]!.dir);
    const used = t.sysroot.status().deployments.flatMap((d) => d.origin?.layers ?? []);
    expect(used.sort()).toEqual([images[0]!.diffId, images[2]!.diffId].sort());
    expect(layersIn(t.dir).length).toBe(2);
    expect(objectsIn(t.dir)).toBe(before + 2); // c's two files (a library, an os-release)
    // c, then d, become current and good (c the rollback); a prune to 1 removes a: c's and d's layers are left.
    for (const img of [images[2]!, images[3]!]) {
      if (img !== images[2]) await t.sysroot.stage(img.dir);
      await t.sysroot.finalize();
      await t.sysroot.boot({ runDir: '/nonexistent' });
      await t.sysroot.markGood();
    }
    const removed = await t.sysroot.prune({ keep: 1 });
    expect(removed.removed).toContain(first.id);
    const left = t.sysroot.status().deployments.flatMap((d) => d.origin?.layers ?? []).sort();
    expect(left).toEqual([images[2]!.diffId, images[3]!.diffId].sort());
    expect(layersIn(t.dir)).toEqual(left.map((d) => d.slice('sha256:'.length)).sort());
    expect(objectsIn(t.dir)).toBe(4);
    // What runs is intact: c's tree still has its files (a tree keeps its inodes).
    expect(fs.readFileSync(path.join(t.sysroot.status().deployments.find((d) => d.current)!.path, 'usr/lib/d.so'), 'utf8')).toBe('library d\n');
  });
});
