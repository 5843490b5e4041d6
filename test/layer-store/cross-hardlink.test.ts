import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { linkLayersNow } from '../../src/layer-store/link-tree.js';
import { importLayer } from '../../src/layer-store/import-layer.js';
import { LayerStore } from '../../src/layer-store/store.js';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { blobOf, makeTar, scratch, writeLayout, type GenEntry } from './helpers.js';

/**
 * A hardlink in an image between a file under usr/ (linked from the layer store) and a
 * name outside it (etc/, written in place on the running machine): the pair stays one
 * inode, as a fresh apply gives, but not the store object's, so an in-place write to the
 * etc/ name changes neither the store nor any other tree linked from it.
 */
const NO_CHECKS = { builtins: { unsafeModes: false, wantsLinks: false, requiredPaths: false, systemdVerify: false, freeSpace: false } } as const;
const layer: GenEntry[] = [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'dir', path: 'usr/lib', mode: 0o755 },
  { type: 'file', path: 'usr/lib/ca.pem', content: 'original\n', mode: 0o644, mtime: 1_500_000_000 },
  { type: 'hardlink', path: 'usr/lib/ca2.pem', target: 'usr/lib/ca.pem' },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'hardlink', path: 'etc/ca.pem', target: 'usr/lib/ca2.pem' },
  { type: 'file', path: 'usr/lib/other', content: 'other\n', mode: 0o644, mtime: 1_500_000_000 },
];

let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const ino = (p: string): number => fs.lstatSync(p).ino;

describe('a hardlink from outside usr/ into it', () => {
  it('a stage keeps the names one inode, not the store object: an in-place write to etc/ changes nothing else', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const img = path.join(t.scratch, 'img');
    writeLayout(img, [{ tar: makeTar(layer) }]);
    const r1 = await t.sysroot.stage(img, NO_CHECKS);
    const tree = r1.path;
    expect(ino(path.join(tree, 'etc/ca.pem'))).toBe(ino(path.join(tree, 'usr/lib/ca.pem')));
    expect(ino(path.join(tree, 'usr/lib/ca2.pem'))).toBe(ino(path.join(tree, 'usr/lib/ca.pem')));
    expect(fs.lstatSync(path.join(tree, 'etc/ca.pem')).nlink, 'the three names only: no store object among them').toBe(3);
    expect(fs.lstatSync(path.join(tree, 'usr/lib/other')).nlink, 'the other file is linked from the store').toBeGreaterThan(1);
    await reboot(t.sysroot);
    // The running machine writes etc/ca.pem in place.
    fs.appendFileSync(path.join(tree, 'etc/ca.pem'), 'appended\n');
    // An update of that image (a layer on top): its usr/ is the image's, not what the machine wrote through etc/.
    const v2 = path.join(t.scratch, 'v2');
    writeLayout(v2, [{ tar: makeTar(layer) }, { tar: makeTar([{ type: 'dir', path: 'opt', mode: 0o755 }, { type: 'file', path: 'opt/new', content: 'new\n', mode: 0o644 }]) }]);
    const r2 = await t.sysroot.stage(v2, NO_CHECKS);
    expect(fs.readFileSync(path.join(r2.path, 'usr/lib/ca.pem'), 'utf8')).toBe('original\n');
    expect(fs.readFileSync(path.join(r2.path, 'etc/ca.pem'), 'utf8')).toBe('original\n');
    expect(ino(path.join(r2.path, 'etc/ca.pem'))).not.toBe(ino(path.join(tree, 'etc/ca.pem')));
    for (const d of fs.readdirSync(path.join(t.dir, 'layers'), { recursive: true }) as string[]) {
      const p = path.join(t.dir, 'layers', d);
      if (fs.lstatSync(p).isFile() && fs.readFileSync(p, 'utf8').includes('appended')) throw new Error(`the store changed: ${d}`);
    }
  });

  it('a tree linked from the store (linkLayersNow) does the same', async () => {
    const dir = scratch('cross-link-');
    try {
      const store = new LayerStore(path.join(dir, 'layers'));
      const [w] = writeLayout(path.join(dir, 'img'), [{ tar: makeTar(layer) }]);
      await importLayer(store, blobOf(w!));
      const tree = path.join(dir, 'tree');
      fs.mkdirSync(tree);
      linkLayersNow({ store: store.dir, tree, diffIds: [w!.diffId], hardlinkPrefixes: ['usr'] });
      expect(ino(path.join(tree, 'etc/ca.pem'))).toBe(ino(path.join(tree, 'usr/lib/ca.pem')));
      expect(fs.lstatSync(path.join(tree, 'etc/ca.pem')).nlink).toBe(3);
      expect(fs.lstatSync(path.join(tree, 'usr/lib/other')).nlink).toBeGreaterThan(1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
