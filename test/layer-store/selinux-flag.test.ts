import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { importLayer } from '../../src/layer-store/import-layer.js';
import { LayerStore } from '../../src/layer-store/store.js';
import { tempSysroot } from '../../src/testing/index.js';
import { blobOf, makeTar, scratch, writeLayout, type GenEntry } from './helpers.js';

/**
 * Whether a stack carries an SELinux policy (etc/selinux/config: the stage then labels what
 * it wrote and links nothing from the store) is kept per layer in its record, so a stage
 * does not read every layer's index for it.
 */
const plain: GenEntry[] = [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'file', path: 'usr/tool', content: 'tool\n', mode: 0o755 },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'file', path: 'etc/selinux-not', content: 'x\n' },
];
const withPolicy: GenEntry[] = [
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'dir', path: 'etc/selinux', mode: 0o755 },
  { type: 'file', path: 'etc/selinux/config', content: 'SELINUX=disabled\n' },
];
const NO_CHECKS = { builtins: { unsafeModes: false, wantsLinks: false, requiredPaths: false, systemdVerify: false, freeSpace: false } } as const;

describe('the layer record says whether the layer has the SELinux policy', () => {
  it('is recorded at import; a record written before the flag gets it from its index once', async () => {
    const dir = scratch('layer-selinux-');
    try {
      const written = writeLayout(path.join(dir, 'img'), [{ tar: makeTar(plain) }, { tar: makeTar(withPolicy) }]);
      const store = new LayerStore(path.join(dir, 'layers'));
      store.prepare();
      const [a, b] = [await importLayer(store, blobOf(written[0]!)), await importLayer(store, blobOf(written[1]!))].map((r) => r.layer);
      expect(a!.record.selinuxConfig).toBe(false);
      expect(b!.record.selinuxConfig).toBe(true);
      // An old record (no flag): read from the index, then recorded.
      const file = path.join(b!.dir, 'layer.json');
      const { selinuxConfig: _, ...old } = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      fs.writeFileSync(file, JSON.stringify(old));
      const again = store.byDiffId(b!.record.diffId)!;
      expect(again.record.selinuxConfig).toBeUndefined();
      expect(store.hasSelinuxConfig(again)).toBe(true);
      expect(store.byDiffId(b!.record.diffId)!.record.selinuxConfig).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the stage decides from the records, not the indexes: a layer recorded with the policy makes the stage copy usr/', async () => {
    const t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    try {
      const img = path.join(t.scratch, 'img');
      writeLayout(img, [{ tar: makeTar(plain) }]);
      const r1 = await t.sysroot.stage(img, NO_CHECKS);
      // Linked from the store: usr/tool shares its object's inode.
      expect(fs.statSync(path.join(r1.path, 'usr/tool')).nlink).toBeGreaterThan(1);
      // The same layer, its record now saying it has the policy (its index does not).
      const layers = new LayerStore(path.join(t.dir, 'layers'));
      const layers0 = layers.layers();
      expect(layers0).toHaveLength(1);
      const [layer] = layers0;
      const file = path.join(layer!.dir, 'layer.json');
      fs.writeFileSync(file, JSON.stringify({ ...layer!.record, selinuxConfig: true }));
      const img2 = path.join(t.scratch, 'img2');
      writeLayout(img2, [{ tar: makeTar(plain) }, { tar: makeTar([{ type: 'file', path: 'etc/other', content: 'o\n' }]) }]);
      const r2 = await t.sysroot.stage(img2, NO_CHECKS);
      expect(fs.statSync(path.join(r2.path, 'usr/tool')).nlink).toBe(1);
    } finally {
      t.cleanup();
    }
  });
});
