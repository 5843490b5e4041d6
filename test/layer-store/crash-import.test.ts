import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { importLayer } from '../../src/layer-store/import-layer.js';
import { linkLayersNow } from '../../src/layer-store/link-tree.js';
import { LayerStore } from '../../src/layer-store/store.js';
import { requireDist } from '../helpers/dist.js';
import { blobOf, describeTree, freshApply, makeTar, scratch, writeLayout, type GenEntry } from './helpers.js';

/**
 * Crash points of an import: the import runs in a child process (the compiled library)
 * killed by SIGKILL right after each of its mutating filesystem calls in turn. After
 * each crash the store never holds a half-imported layer: the layer is either absent or
 * complete (its linked tree is the fresh apply), and the next import removes the
 * leftovers and completes it.
 */
const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'crash-import-child.mjs');
const top = scratch('layer-crash-');
afterAll(() => fs.rmSync(top, { recursive: true, force: true }));

const LAYER: GenEntry[] = [
  { type: 'dir', path: 'usr' },
  { type: 'dir', path: 'usr/bin', mode: 0o755 },
  { type: 'file', path: 'usr/bin/a', content: 'a\n', mode: 0o755 },
  { type: 'file', path: 'usr/bin/b', content: 'b\n', xattrs: [['user.k', Buffer.from('v')]] },
  { type: 'file', path: 'usr/bin/a-again', content: 'a\n', mode: 0o755 },
  { type: 'hardlink', path: 'usr/bin/b-link', target: 'usr/bin/b' },
  { type: 'dir', path: 'etc' },
  { type: 'file', path: 'etc/conf', content: 'conf\n' },
  { type: 'file', path: 'etc/.wh.old', content: '' },
];

function child(arg: object): ReturnType<typeof spawnSync> {
  return spawnSync(process.execPath, [CHILD, JSON.stringify(arg)], { encoding: 'utf8', timeout: 60_000 });
}

describe('an import killed at any point leaves no half-imported layer', () => {
  it('after a SIGKILL at each mutating call: the layer is absent or whole, and the next import completes it', () => crashPoints(false), 600_000);

  // As a stage imports (deferCommit): the layer left under tmp/, one syncfs, then commitPending.
  it('the same with the commit deferred to a later syncfs (a stage): absent or whole at each call, the import and the commit', () => crashPoints(true), 600_000);
});

async function crashPoints(defer: boolean): Promise<void> {
  {
    const base = path.join(top, defer ? 'deferred' : 'direct');
    requireDist();
    const [w] = writeLayout(path.join(base, 'img'), [{ tar: makeTar(LAYER), gzip: true }]);
    await freshApply(path.join(base, 'img'), path.join(base, 'fresh'));
    const want = describeTree(path.join(base, 'fresh'));
    const arg = (store: string) => ({ store, file: w!.file, digest: w!.digest, diffId: w!.diffId, size: w!.size, defer });
    const counted = child(arg(path.join(base, 'count')));
    expect(counted.status, String(counted.stderr)).toBe(0);
    const { count, ops } = JSON.parse(String(counted.stdout)) as { count: number; ops: string[] };
    expect(count).toBeGreaterThan(10);
    let absent = 0;
    let whole = 0;
    for (let k = 1; k <= count; k++) {
      const dir = path.join(base, `k${k}`);
      fs.mkdirSync(dir);
      const killed = child({ ...arg(path.join(dir, 'store')), killAfter: k });
      expect(killed.signal, `crash point ${k} (${ops[k - 1]}): ${killed.stderr}`).toBe('SIGKILL');
      const store = new LayerStore(path.join(dir, 'store'));
      const link = (name: string): string[] => {
        const tree = path.join(dir, name);
        fs.mkdirSync(tree);
        linkLayersNow({ store: store.dir, tree, diffIds: [w!.diffId], hardlinkPrefixes: ['usr'] });
        return describeTree(tree);
      };
      const found = store.find({ diffId: w!.diffId });
      if (found === null) absent += 1;
      else {
        whole += 1;
        expect(link('after-crash'), `crash point ${k} (${ops[k - 1]})`).toEqual(want);
      }
      const again = await importLayer(store, blobOf(w!));
      expect(again.imported).toBe(found === null);
      expect(fs.readdirSync(store.tmpDir), `crash point ${k}: leftovers`).toEqual([]);
      expect(store.find({ digest: w!.digest })?.record.diffId).toBe(w!.diffId);
      expect(link('after-reimport'), `crash point ${k} (${ops[k - 1]})`).toEqual(want);
      fs.rmSync(dir, { recursive: true, force: true });
    }
    // Both outcomes happen: the crash points span the whole import, its commit included.
    expect(absent).toBeGreaterThan(0);
    expect(whole).toBeGreaterThan(0);
  }
}
