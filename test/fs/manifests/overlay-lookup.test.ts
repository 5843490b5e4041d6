/**
 * A manifest's overlay as ManifestIndex looks paths up in it (src/fs/manifests/overlay-lookup.ts):
 * a line is parsed when it is looked up, not before; what the whole parse checks of the
 * file (header, order, dirty paths) is still refused at the open; the lookups answer as
 * the whole parse does (the random manifests of manifest-overlay.test.ts check that too).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManifestIndex } from '../../../src/fs/manifests/manifest-index.js';
import { ManifestWriter } from '../../../src/fs/manifests/manifest.js';
import { formatEntry, type ManifestEntry } from '../../../src/fs/manifests/manifest-line.js';
import { formatOverlay, overlayFile, readOverlay } from '../../../src/fs/manifests/manifest-overlay.js';
import { overlayLookupOf } from '../../../src/fs/manifests/overlay-lookup.js';
import { comparePaths, isUnder } from '../../../src/fs/core/paths.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-overlay-lookup-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const H = 'ab'.repeat(32);
const entry = (p: string, size: number): ManifestEntry => ({ p, t: 'f', m: 0o644, u: 0, g: 0, s: size, h: H, mt: 1 });

let n = 0;
/** A manifest of `base` with an overlay whose text is `overlay` (as given: lines may be broken on purpose). */
function manifestWith(base: ManifestEntry[], overlay: string): string {
  const file = path.join(dir, `m${n++}.ndjson`);
  const w = new ManifestWriter(file);
  for (const e of base) w.write(e);
  w.close(false);
  fs.writeFileSync(overlayFile(file), overlay);
  return file;
}

const BASE = [entry('etc', 1), entry('etc/a', 2), entry('etc/b', 3), entry('etc/c', 4), entry('etc/d', 5)];
/** An overlay's text with one line replaced by `line`. */
const withLine = (dirty: string[], removed: string[], entries: ManifestEntry[], i: number, line: string): string => {
  const lines = formatOverlay('00'.repeat(32), dirty, removed, entries).split('\n');
  lines[i] = line;
  return lines.join('\n');
};

function rng(seed: number): (k: number) => number {
  let s = seed >>> 0;
  return (k) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s >>> 8) % k;
  };
}
const NAMES = ['etc', 'lib', 'lib-x', 'a', 'conf.d', 'z', 'é'];

describe('overlay lookup', () => {
  it('answers as the base patched by the overlay, before any whole parse of it (random manifests)', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const rnd = rng(seed);
      const all = new Set<string>();
      for (let i = 0, k = 20 + rnd(150); i < k; i++) {
        const parts: string[] = [];
        for (let d = 0, depth = 1 + rnd(4); d < depth; d++) parts.push(NAMES[rnd(NAMES.length)]! + (rnd(3) === 0 ? String(rnd(9)) : ''));
        for (let d = 1; d <= parts.length; d++) all.add(parts.slice(0, d).join('/'));
      }
      const paths = [...all].sort((x, y) => (x < y ? -1 : 1));
      const base = paths.filter(() => rnd(4) !== 0);
      const baseEntries = base.map((p) => entry(p, rnd(1000)));
      const dirty = new Set(paths.filter(() => rnd(4) === 0));
      const removed = new Set([...dirty].filter(() => rnd(3) === 0));
      const fresh = [...dirty].filter(() => rnd(3) !== 0).map((p) => entry(p, 5000 + rnd(1000)));
      const sorted = (es: ManifestEntry[]): ManifestEntry[] => [...es].sort((x, y) => comparePaths(x.p, y.p));
      const file = manifestWith(sorted(baseEntries), formatOverlay('00'.repeat(32), dirty, removed, sorted(fresh)));
      const gone = (p: string): boolean => dirty.has(p) || [...removed].some((r) => isUnder(p, r));
      const want = new Map([...baseEntries.filter((e) => !gone(e.p)), ...fresh].map((e) => [e.p, e]));
      const index = new ManifestIndex(file);
      try {
        for (const p of paths) expect(index.find(p), p).toEqual(want.get(p) ?? null);
      } finally {
        index.close();
      }
    }
  });

  it('parses only the lines looked up: a broken line elsewhere does not stop a lookup, and is refused when looked up', () => {
    // etc/c's line has its path but is no entry (a bad type): the whole parse refuses the file.
    const text = withLine(['etc/a', 'etc/c', 'etc/d'], ['etc/d'], [entry('etc/a', 20), entry('etc/c', 40)], 2, '{"p":"etc/c","t":"nonsense"}');
    const file = manifestWith(BASE, text);
    expect(() => readOverlay(file)).toThrow(/invalid/);
    const index = new ManifestIndex(file);
    try {
      expect(index.find('etc/a')?.s).toBe(20);
      expect(index.find('etc/b')?.s).toBe(3);
      expect(index.find('etc/d')).toBeNull();
      expect(() => index.find('etc/c')).toThrow(/invalid/);
    } finally {
      index.close();
    }
  });

  it('refuses at the open what the whole parse refuses of the file: a torn text, a bad header, paths out of order, a path not dirty', () => {
    const good = formatOverlay('00'.repeat(32), ['etc/a', 'etc/c'], [], [entry('etc/a', 20), entry('etc/c', 40)]);
    const cases: [string, RegExp][] = [
      [good.slice(0, -2), /torn/],
      [good.replace('{"overlay":1', '{"overlay":2'), /not an overlay header/],
      [withLine(['etc/a', 'etc/c'], [], [entry('etc/a', 20), entry('etc/c', 40)], 1, formatEntry(entry('etc/d', 1))), /not one of its dirty paths/],
      [withLine(['etc/a', 'etc/c'], [], [entry('etc/a', 20), entry('etc/c', 40)], 2, formatEntry(entry('etc/a', 1))), /out of order/],
    ];
    for (const [text, why] of cases) {
      const file = manifestWith(BASE, text);
      expect(() => new ManifestIndex(file), String(why)).toThrow(why);
      expect(() => readOverlay(file), String(why)).toThrow(why);
    }
  });

  it('a line whose path has escapes is read by the whole parse; a lookup of the same text again is the one made for it; a new text is looked up anew', () => {
    const file = manifestWith(BASE, formatOverlay('00'.repeat(32), ['etc/a', 'etc/q"uote'], [], [entry('etc/a', 20), entry('etc/q"uote', 7)]));
    const index = new ManifestIndex(file);
    expect(index.find('etc/q"uote')?.s).toBe(7);
    expect(index.find('etc/a')?.s).toBe(20);
    index.close();
    const first = overlayLookupOf(file);
    expect(overlayLookupOf(file)).toBe(first);
    fs.writeFileSync(overlayFile(file), formatOverlay('00'.repeat(32), ['etc/a'], [], [entry('etc/a', 21)]));
    expect(overlayLookupOf(file)).not.toBe(first);
    expect(overlayLookupOf(file)?.find('etc/a')?.s).toBe(21);
    // The whole view, when a reader asks for it, is the parse of the text the lookup read.
    expect(new ManifestIndex(file).overlayView?.entries.map((e) => e.s)).toEqual([21]);
  });
});
