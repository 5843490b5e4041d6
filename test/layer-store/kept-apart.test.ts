import { afterEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import { importLayer } from '../../src/layer-store/import-layer.js';
import { keptApart, layerLines, layerPathLines } from '../../src/layer-store/stack-ops.js';
import { LayerStore, type StoredLayer } from '../../src/layer-store/store.js';
import { blobOf, makeTar, scratch, writeLayout, type GenEntry } from './helpers.js';

/**
 * keptApart reads a lower layer's file, directory and attribute lines by type and path
 * alone (layerPathLines: sliced from the text, not parsed): the same lines in the same
 * order as layerLines, and the same answer, names with escapes (a quote, a backslash,
 * bytes that are not UTF-8) included.
 */
let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  dirs = [];
});

async function stored(layers: GenEntry[][]): Promise<StoredLayer[]> {
  const dir = scratch('kept-apart-');
  dirs.push(dir);
  const written = writeLayout(`${dir}/img`, layers.map((l) => ({ tar: makeTar(l) })));
  const store = new LayerStore(`${dir}/layers`);
  store.prepare();
  const out: StoredLayer[] = [];
  for (const w of written) out.push((await importLayer(store, blobOf(w))).layer);
  return out;
}

const odd = Buffer.concat([Buffer.from('usr/lib/bad-'), Buffer.from([0xff, 0xfe]), Buffer.from('-name')]);
const base: GenEntry[] = [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'dir', path: 'usr/lib', mode: 0o755 },
  { type: 'file', path: 'usr/lib/plain', content: 'a' },
  { type: 'file', path: 'usr/lib/with "quote"', content: 'b' },
  { type: 'file', path: 'usr/lib/back\\slash', content: 'c' },
  { type: 'file', path: odd, content: 'd' },
  { type: 'file', path: 'usr/lib/ünïcode', content: 'e' },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'file', path: 'etc/os-release', content: 'ID=x\n' },
  { type: 'symlink', path: 'lib', target: 'usr/lib' },
];

describe('keptApart over layerPathLines', () => {
  it('gives layerLines\' types and paths in its order, and the same answer', async () => {
    const top: GenEntry[] = [
      { type: 'dir', path: 'usr/share', mode: 0o755 },
      { type: 'file', path: 'usr/share/"x"', content: 'f' },
      { type: 'file', path: 'etc/new', content: 'g' },
    ];
    const layers = await stored([base, top]);
    for (const l of layers) expect([...layerPathLines(l)].map((x) => `${x.t} ${x.p}`)).toEqual([...layerLines(l)].map((x) => `${x.t} ${x.p}`));
    // Sliced where the path is plain, parsed where it has an escape.
    const byPath = new Map([...layerPathLines(layers[0]!)].map((x) => [x.p, Object.keys(x)]));
    expect(byPath.get('usr/lib/plain')).toEqual(['t', 'p']);
    expect(byPath.get('usr/lib/with "quote"')).toContain('k');
    expect(byPath.get('usr/lib/back\\slash')).toContain('k');
    const fast = keptApart(layers, 'usr');
    expect(fast).toEqual(keptApart(layers, 'usr', [], layerLines));
    expect(fast.apart).toBe(true);
  });

  it('finds a line under a symlink of the tree (lib -> usr/lib, then lib/x), as the parsed lines do', async () => {
    const layers = await stored([base, [{ type: 'file', path: 'lib/through', content: 'h' }]]);
    expect(keptApart(layers, 'usr')).toEqual(keptApart(layers, 'usr', [], layerLines));
    expect(keptApart(layers, 'usr').apart).toBe(false);
  });
});
