/**
 * The layer import's resume step, as every writer runs it (recovery, under the lock): an
 * import or a release a crash cut short (its name under layers/tmp/) is removed with the
 * objects no layer names, before any stage could look for them, and recovery says so.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { importLayer } from '../../src/layer-store/import-layer.js';
import { LayerStore } from '../../src/layer-store/store.js';
import { Sysroot } from '../../src/sysroot.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { blobOf, makeTar, writeLayout } from './helpers.js';

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const objectsOf = (store: LayerStore): string[] => fs.readdirSync(store.objectsDir).flatMap((kk) => fs.readdirSync(path.join(store.objectsDir, kk)).map((r) => `${kk}${r}`)).sort();

describe('recovery resumes a layer import cut short', () => {
  it('removes its temp directory and the objects no layer names, keeps every stored layer whole, and reports it', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const [w] = writeLayout(path.join(t.dir, '..', `${path.basename(t.dir)}-img`), [{ tar: makeTar([{ type: 'dir', path: 'usr' }, { type: 'file', path: 'usr/a', content: 'a\n' }]), gzip: true }]);
    const store = new LayerStore(path.join(t.dir, 'layers'));
    const kept = await importLayer(store, blobOf(w!));
    const good = objectsOf(store);
    // What a crashed import leaves: its temp name, and an object it created that no layer names.
    const left = path.join(store.tmpDir, '.stagedroot-tmp-1-abcdef');
    fs.mkdirSync(path.join(left, 'o'), { recursive: true });
    fs.mkdirSync(path.join(store.objectsDir, 'ff'), { recursive: true });
    fs.writeFileSync(path.join(store.objectsDir, 'ff', 'half-written'), '');

    const s = await Sysroot.open(t.dir);
    expect(s.recovery.join('\n')).toMatch(/layer import or release cut short \(layers\/tmp\/\.stagedroot-tmp-1-abcdef\)/);
    expect(fs.existsSync(left)).toBe(false);
    expect(objectsOf(store)).toEqual(good);
    expect(store.find({ diffId: kept.layer.record.diffId })?.record.files).toBe(1);
  });

  it('a sysroot without a layer store is left without one', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const s = await Sysroot.open(t.dir);
    expect(s.recovery).toEqual([]);
    expect(fs.existsSync(path.join(t.dir, 'layers'))).toBe(false);
  });
});
