/**
 * A manifest's overlay (src/fs/manifests/manifest-overlay.ts): every reader of a manifest
 * (ManifestReader, ManifestCursor with its byte runs, ManifestIndex, the size sum) reads
 * the manifest as the overlay patches it, checked against a plain reference on random
 * manifests and overlays; the digest covers the base and the overlay.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManifestCursor } from '../../../src/fs/manifests/manifest-cursor.js';
import { ManifestIndex } from '../../../src/fs/manifests/manifest-index.js';
import { ManifestWriter, readManifest } from '../../../src/fs/manifests/manifest.js';
import { formatEntry, type ManifestEntry } from '../../../src/fs/manifests/manifest-line.js';
import { composeOverlay, formatOverlay, manifestDigest, overlayDigest, overlayFile, readOverlay } from '../../../src/fs/manifests/manifest-overlay.js';
import { sumFileSizes } from '../../../src/fs/manifests/manifest-sizes.js';
import { hashFile } from '../../../src/fs/core/hash.js';
import { comparePaths, isUnder } from '../../../src/fs/core/paths.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-overlay-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const H = 'ab'.repeat(32);

function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s >>> 8) % n;
  };
}

const NAMES = ['etc', 'usr', 'lib', 'lib-x', 'a', 'b', 'conf.d', 'z', 'é'];

function randomPaths(rnd: (n: number) => number, n: number): string[] {
  const paths = new Set<string>();
  for (let i = 0; i < n; i++) {
    const parts: string[] = [];
    for (let d = 0, depth = 1 + rnd(4); d < depth; d++) parts.push(NAMES[rnd(NAMES.length)]! + (rnd(3) === 0 ? String(rnd(9)) : ''));
    for (let d = 1; d <= parts.length; d++) paths.add(parts.slice(0, d).join('/'));
  }
  return [...paths].sort(comparePaths);
}

const entry = (p: string, size: number): ManifestEntry => ({ p, t: 'f', m: 0o644, u: 0, g: 0, s: size, h: H, mt: 1 });

function writeManifest(file: string, entries: ManifestEntry[]): void {
  const w = new ManifestWriter(file);
  for (const e of entries) w.write(e);
  w.close(false);
}

describe('manifest overlay', () => {
  it('every reader reads the base as the overlay patches it', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const rnd = rng(seed);
      const base = randomPaths(rnd, 20 + rnd(200)).map((p) => entry(p, rnd(1000)));
      const other = randomPaths(rnd, 10 + rnd(30));
      // Dirty: some base paths (changed or gone) and some new ones; removed: some base paths (their subtrees go).
      const dirty = new Set([...base.filter(() => rnd(8) === 0).map((e) => e.p), ...other.filter(() => rnd(3) === 0)]);
      const removed = new Set([...dirty].filter(() => rnd(3) === 0));
      const fresh = [...dirty].filter(() => rnd(3) !== 0).sort(comparePaths).map((p) => entry(p, 5000 + rnd(1000)));
      const file = path.join(dir, `m${seed}.ndjson`);
      writeManifest(file, base);
      fs.writeFileSync(overlayFile(file), formatOverlay('00'.repeat(32), dirty, removed, fresh));

      const gone = (p: string): boolean => dirty.has(p) || [...removed].some((r) => isUnder(p, r));
      const want = [...base.filter((e) => !gone(e.p)), ...fresh].sort((a, b) => comparePaths(a.p, b.p));
      expect([...readManifest(file)]).toEqual(want);

      // The cursor, as snapshot-manifest drives it: runs under a prefix copied as bytes.
      const out = path.join(dir, `c${seed}.ndjson`);
      const w = new ManifestWriter(out);
      const c = new ManifestCursor(file, 64);
      for (let r = c.peekRaw(); r !== null; r = c.peekRaw()) {
        const prefix = ['usr', 'etc', 'lib'].find((t) => r.p !== t && isUnder(r.p, t));
        if (prefix !== undefined && c.copyRun(w, prefix, null).lines > 0) continue;
        c.nextRaw();
        w.writeLine(r.p, r.line);
      }
      c.close();
      w.close(false);
      expect([...readManifest(out)]).toEqual(want);
      expect(fs.readFileSync(out, 'utf8')).toBe(want.map((e) => formatEntry(e) + '\n').join(''));

      const sizes = want.filter((e) => !isUnder(e.p, 'usr')).reduce((n, e) => n + (e.s ?? 0), 0);
      expect(sumFileSizes(file, ['usr'])).toBe(sizes);

      const index = new ManifestIndex(file);
      const byPath = new Map(want.map((e) => [e.p, e]));
      for (const p of [...base.map((e) => e.p), ...other]) expect(index.find(p)).toEqual(byPath.get(p) ?? null);
      index.close();
    }
  });

  it('an overlay composed on another reads as the two applied in turn, and as a full rewrite patched by the second', () => {
    /** A random overlay over the paths of `over` (and some new ones), as a change set or a merge records it. */
    const randomOverlay = (rnd: (n: number) => number, over: readonly ManifestEntry[], size: number) => {
      const dirty = new Set([...over.filter(() => rnd(6) === 0).map((e) => e.p), ...randomPaths(rnd, 5 + rnd(20)).filter(() => rnd(3) === 0)]);
      const removed = new Set([...dirty].filter(() => rnd(3) === 0));
      const entries = [...dirty].filter(() => rnd(3) !== 0).sort(comparePaths).map((p) => entry(p, size + rnd(1000)));
      return { dirty, removed, entries };
    };
    const applied = (base: readonly ManifestEntry[], o: { dirty: ReadonlySet<string>; removed: ReadonlySet<string>; entries: readonly ManifestEntry[] }): ManifestEntry[] => {
      const gone = (p: string): boolean => o.dirty.has(p) || [...o.removed].some((r) => isUnder(p, r));
      return [...base.filter((e) => !gone(e.p)), ...o.entries].sort((a, b) => comparePaths(a.p, b.p));
    };
    for (let seed = 100; seed < 140; seed++) {
      const rnd = rng(seed);
      const base = randomPaths(rnd, 20 + rnd(150)).map((e) => entry(e, rnd(1000)));
      const a = randomOverlay(rnd, base, 5000);
      const p = randomOverlay(rnd, applied(base, a), 9000);
      const c = composeOverlay(a, p);
      const file = path.join(dir, `composed${seed}.ndjson`);
      writeManifest(file, base);
      fs.writeFileSync(overlayFile(file), formatOverlay(hashFile(file), c.dirty, c.removed, c.entries));
      const want = applied(applied(base, a), p);
      expect([...readManifest(file)]).toEqual(want);
      // A full rewrite (the base as `a` patches it, written whole) patched by `p` alone reads the same.
      const full = path.join(dir, `full${seed}.ndjson`);
      writeManifest(full, applied(base, a));
      fs.writeFileSync(overlayFile(full), formatOverlay(hashFile(full), p.dirty, p.removed, p.entries));
      expect([...readManifest(full)]).toEqual(want);
      // Composed again on nothing, or nothing on it: the same overlay.
      expect(composeOverlay(null, c)).toBe(c);
      const index = new ManifestIndex(file);
      const byPath = new Map(want.map((e) => [e.p, e]));
      for (const e of [...base, ...p.entries]) expect(index.find(e.p)).toEqual(byPath.get(e.p) ?? null);
      index.close();
    }
  });

  it('the digest covers the base and the overlay; a torn or foreign overlay is refused', () => {
    const file = path.join(dir, 'digest.ndjson');
    writeManifest(file, [entry('etc', 1), entry('etc/a', 2)]);
    expect(manifestDigest(file)).toBe(hashFile(file));
    const text = formatOverlay(hashFile(file), ['etc/a'], [], [entry('etc/a', 3)]);
    fs.writeFileSync(overlayFile(file), text);
    expect(readOverlay(file)?.base).toBe(hashFile(file));
    const recorded = overlayDigest(hashFile(file), text);
    expect(manifestDigest(file)).toBe(recorded);
    fs.appendFileSync(file, formatEntry(entry('etc/b', 4)) + '\n');
    expect(manifestDigest(file)).not.toBe(recorded);
    fs.writeFileSync(overlayFile(file), text.slice(0, -3));
    expect(() => readOverlay(file)).toThrow(/unreadable/);
    expect(() => [...readManifest(file)]).toThrow(/unreadable/);
    fs.writeFileSync(overlayFile(file), formatOverlay(hashFile(file), ['etc/a'], [], [entry('etc/b', 3)]));
    expect(() => readOverlay(file)).toThrow(/not one of its dirty paths/);
  });

  it('a reader of the same overlay text takes the parse made for it; a changed text is parsed again', () => {
    const file = path.join(dir, 'cached.ndjson');
    writeManifest(file, [entry('etc', 1), entry('etc/a', 2)]);
    fs.writeFileSync(overlayFile(file), formatOverlay(hashFile(file), ['etc/a'], [], [entry('etc/a', 3)]));
    const first = readOverlay(file);
    expect(readOverlay(file)).toBe(first);
    expect([...readManifest(file)].map((e) => e.s)).toEqual([1, 3]);
    // Rewritten (as a merge rewrites it, through a rename): the new text is what every reader sees.
    fs.writeFileSync(`${overlayFile(file)}.tmp`, formatOverlay(hashFile(file), ['etc/a'], [], [entry('etc/a', 4)]));
    fs.renameSync(`${overlayFile(file)}.tmp`, overlayFile(file));
    expect(readOverlay(file)).not.toBe(first);
    expect([...readManifest(file)].map((e) => e.s)).toEqual([1, 4]);
    expect(new ManifestIndex(file).find('etc/a')?.s).toBe(4);
    // Torn after a good read: refused, not the cached parse.
    fs.writeFileSync(overlayFile(file), formatOverlay(hashFile(file), ['etc/a'], [], [entry('etc/a', 4)]).slice(0, -2));
    expect(() => readOverlay(file)).toThrow(/unreadable/);
    fs.rmSync(overlayFile(file));
    expect(readOverlay(file)).toBeNull();
  });

  it('the copy\'s free-space figure parses only the overlay lines outside the hardlinked prefixes', () => {
    // A stage's overlay names every path its updates wrote under usr/; the preflight (sumFileSizes) reads the
    // others only: a line under usr/ is not parsed (a damaged one there is the manifest pass's to find), one outside is.
    const file = path.join(dir, 'sizes.ndjson');
    writeManifest(file, [entry('etc/a', 10), entry('etc/b', 20), entry('usr/x', 1000), entry('usr/y', 2000)]);
    const sha = hashFile(file);
    const good = formatOverlay(sha, ['etc/b', 'etc/c', 'usr/x'], [], [entry('etc/b', 21), entry('etc/c', 30), entry('usr/x', 1001)]);
    fs.writeFileSync(overlayFile(file), good);
    expect(sumFileSizes(file, ['usr'])).toBe(10 + 21 + 30);
    const damaged = (p: string) => good.replace(`{"p":"${p}","t":"f","m":420,"u":0,"g":0,"s":`, `{"p":"${p}","t":"f","m":420,"u":0,"g":0,"s":-`);
    expect(damaged('usr/x')).not.toBe(good);
    fs.writeFileSync(overlayFile(file), damaged('usr/x'));
    expect(sumFileSizes(file, ['usr'])).toBe(10 + 21 + 30);
    fs.writeFileSync(overlayFile(file), damaged('etc/c'));
    expect(() => sumFileSizes(file, ['usr'])).toThrow(/line 3/);
    fs.rmSync(overlayFile(file));
  });
});
