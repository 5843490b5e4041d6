/**
 * ManifestCursor (src/fs/manifests/manifest-cursor.ts): line by line it reads what ManifestReader
 * reads, and copyRun copies, byte for byte, exactly the lines a line-by-line loop would
 * copy — checked against that loop on random manifests with the shapes that take the
 * slow path (escapes, non-ASCII and raw-byte names, surrogate pairs, quotes), lines
 * longer than the read buffer, empty lines and a last line without its newline.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManifestCursor } from '../../../src/fs/manifests/manifest-cursor.js';
import { ManifestReader, ManifestWriter, readManifest } from '../../../src/fs/manifests/manifest.js';
import type { ManifestEntry } from '../../../src/fs/manifests/manifest-line.js';
import { sumFileSizes } from '../../../src/fs/manifests/manifest-sizes.js';
import { comparePaths, isUnder } from '../../../src/fs/core/paths.js';
import { formatOverlay, overlayFile } from '../../../src/fs/manifests/manifest-overlay.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-cursor-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const H = 'cd'.repeat(32);

function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s >>> 8) % n;
  };
}

// Names that take every path of the cursor: plain ASCII, "-" and "." (which sort before
// "/" in a plain byte order, not in comparePaths'), quotes and backslashes (escaped in
// JSON), non-ASCII, a surrogate pair, raw-byte escapes (names.ts), a long name.
const NAMES = ['a', 'b', 'lib', 'lib-x', 'lib.d', 'usr', 'usr-old', 'share', 'z', 'q"uote', 'back\\slash', 'é', 'ü-x', '😀', '%FF', 'x'.repeat(300)];

function randomTree(rnd: (n: number) => number, n: number): string[] {
  const paths = new Set<string>();
  for (let i = 0; i < n; i++) {
    const depth = 1 + rnd(4);
    const parts: string[] = [];
    for (let d = 0; d < depth; d++) parts.push(NAMES[rnd(NAMES.length)]! + (rnd(3) === 0 ? String(rnd(20)) : ''));
    for (let d = 1; d <= parts.length; d++) paths.add(parts.slice(0, d).join('/'));
  }
  return [...paths].sort(comparePaths);
}

function lineOf(p: string, rnd: (n: number) => number): string {
  const e: ManifestEntry = rnd(3) === 0 ? { p, t: 'd', m: 0o755, u: 0, g: 0 } : { p, t: 'f', m: 0o644, u: 0, g: 0, s: rnd(1_000_000), h: H, mt: 1 };
  // Now and then a line longer than the small read buffer below.
  if (e.t === 'f' && rnd(40) === 0) e.x = 'ab'.repeat(16);
  return JSON.stringify(e) + (rnd(50) === 0 ? ' '.repeat(3000) : '');
}

describe('ManifestCursor', () => {
  it('copyRun copies exactly the lines a line-by-line loop copies, and reads the rest as ManifestReader does', () => {
    let runs = 0;
    let copied = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const rnd = rng(seed);
      const paths = randomTree(rnd, 30 + rnd(300));
      const lines = paths.map((p) => lineOf(p, rnd));
      // Empty lines here and there; sometimes no newline after the last line.
      const text = lines.map((l) => (rnd(30) === 0 ? `${l}\n\n` : `${l}\n`)).join('');
      const file = path.join(dir, `m${seed}`);
      fs.writeFileSync(file, rnd(2) === 0 ? text.slice(0, -1) : text);

      const out = path.join(dir, `o${seed}`);
      const w = new ManifestWriter(out, undefined, { sha256: true });
      const expected: string[] = [];
      const c = new ManifestCursor(file, 256 + rnd(4096));
      const model = new ManifestReader(file);
      let bytes = 0;
      let expectedBytes = 0;
      for (;;) {
        const r = c.peekRaw();
        const m = model.peekRaw();
        expect(r?.p ?? null).toBe(m?.p ?? null);
        expect(r?.line ?? null).toBe(m?.line ?? null);
        if (r === null) break;
        const prefix = [NAMES[rnd(NAMES.length)]!, r.p.split('/')[0]!, r.p.split('/').slice(0, 2).join('/')][rnd(3)]!;
        if (rnd(2) === 0 && r.p !== prefix && isUnder(r.p, prefix)) {
          // A run from here: the model takes lines while they are strictly under the prefix and before the stop.
          const stop = rnd(4) === 0 ? null : paths[Math.min(paths.length - 1, paths.indexOf(r.p) + 1 + rnd(40))]!;
          const bound = stop !== null && comparePaths(stop, r.p) <= 0 ? null : stop;
          for (let e = model.peekRaw(); e !== null && e.p !== prefix && isUnder(e.p, prefix) && (bound === null || comparePaths(e.p, bound) < 0); e = model.peekRaw()) {
            expected.push(e.line);
            const s = /,"s":(\d+)/.exec(e.line);
            expectedBytes += s ? Number(s[1]) : 0;
            model.nextRaw();
          }
          const got = c.copyRun(w, prefix, bound);
          bytes += got.bytes;
          runs += 1;
          copied += got.lines;
          expect(got.lines).toBeGreaterThan(0);
        } else {
          expected.push(r.line);
          w.writeLine(r.p, r.line);
          c.nextRaw();
          model.nextRaw();
        }
      }
      c.close();
      model.close();
      w.close(false);
      expect(fs.readFileSync(out, 'utf8')).toBe(expected.map((l) => `${l}\n`).join(''));
      expect(bytes).toBe(expectedBytes);
      expect(w.count).toBe(expected.length);
      // Hashed as written (raw runs included): the sha256 the commit records without reading the file back.
      expect(w.sha256()).toBe(createHash('sha256').update(fs.readFileSync(out)).digest('hex'));
    }
    // The random walk took both paths many times.
    expect(runs).toBeGreaterThan(200);
    expect(copied).toBeGreaterThan(runs);
  });

  it('with an overlay naming a path every few lines, copyRun over a manifest larger than its buffer copies what a full read gives', () => {
    // The shape of a tree after many stages: 50-line directories, an overlay (every stage's
    // changes since the base manifest) naming one path in 37, so that every run is short.
    const paths = ['usr', 'usr/share'];
    for (let d = 0; d < 200; d++) {
      paths.push(`usr/share/d${String(d).padStart(4, '0')}`);
      for (let f = 0; f < 50; f++) paths.push(`usr/share/d${String(d).padStart(4, '0')}/f${String(f).padStart(2, '0')}`);
    }
    const line = (p: string, s: number) => JSON.stringify(p.split('/').length < 4 ? { p, t: 'd', m: 0o755, u: 0, g: 0 } : { p, t: 'f', m: 0o644, u: 0, g: 0, s, h: H, mt: 1 });
    const file = path.join(dir, 'overlaid');
    fs.writeFileSync(file, paths.map((p) => `${line(p, 100)}\n`).join(''));
    expect(fs.statSync(file).size).toBeGreaterThan(1 << 20); // more than one read of the default buffer
    const dirty = paths.filter((p, i) => i % 37 === 5 && p.split('/').length === 4);
    const entries = dirty.map((p) => JSON.parse(line(p, 7)) as ManifestEntry);
    fs.writeFileSync(overlayFile(file), formatOverlay(createHash('sha256').update(fs.readFileSync(file)).digest('hex'), dirty, [], entries));

    const out = path.join(dir, 'overlaid.out');
    const w = new ManifestWriter(out);
    const c = new ManifestCursor(file);
    let runs = 0;
    let bytes = 0;
    for (let r = c.peekRaw(); r !== null; r = c.peekRaw()) {
      const got = r.p !== 'usr' ? c.copyRun(w, 'usr', null) : { lines: 0, bytes: 0 };
      if (got.lines > 0) {
        runs += 1;
        bytes += got.bytes;
        continue;
      }
      w.writeLine(r.p, r.line);
      if (c.entryOf(r).t === 'f') bytes += c.entryOf(r).s ?? 0;
      c.nextRaw();
    }
    c.close();
    w.close(false);
    // The model: ManifestReader, line by line (it reads the overlay beside the file too).
    const model: string[] = [];
    const mr = new ManifestReader(file);
    for (let r = mr.peekRaw(); r !== null; mr.nextRaw(), r = mr.peekRaw()) model.push(r.line);
    mr.close();
    expect(model.length).toBe(paths.length);
    expect(fs.readFileSync(out, 'utf8')).toBe(model.map((l) => `${l}\n`).join(''));
    expect(bytes).toBe(model.reduce((n, l) => n + ((JSON.parse(l) as ManifestEntry).s ?? 0), 0));
    // A run stopped before each overlay point (and went on after it).
    expect(runs).toBeGreaterThan(dirty.length);
  });

  it('a run stops at the first line that is not strictly below the prefix', () => {
    const file = path.join(dir, 'prefix');
    const ps = ['usr', 'usr/a', 'usr/a/b', 'usr/b', 'usr-x', 'usr.d', 'usrx', 'var'];
    fs.writeFileSync(file, ps.map((p) => JSON.stringify({ p, t: 'd', m: 493, u: 0, g: 0 }) + '\n').join(''));
    const c = new ManifestCursor(file);
    const out = path.join(dir, 'prefix.out');
    const w = new ManifestWriter(out);
    expect(c.nextRaw()?.p).toBe('usr');
    expect(c.copyRun(w, 'usr', null).lines).toBe(3);
    expect(c.peekRaw()?.p).toBe('usr-x');
    c.close();
    w.close(false);
    expect(fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as ManifestEntry).p)).toEqual(['usr/a', 'usr/a/b', 'usr/b']);
  });

  it('sumFileSizes, which passes over the runs under the prefixes, sums what a full read sums', () => {
    for (let seed = 100; seed < 130; seed++) {
      const rnd = rng(seed);
      const paths = randomTree(rnd, 50 + rnd(400));
      const file = path.join(dir, `sizes${seed}`);
      fs.writeFileSync(file, paths.map((p) => `${lineOf(p, rnd)}\n`).join(''));
      const prefixes = [...new Set([NAMES[rnd(NAMES.length)]!, paths[rnd(paths.length)]!.split('/')[0]!, paths[rnd(paths.length)]!])];
      let expected = 0;
      for (const e of readManifest(file)) if (e.t === 'f' && !prefixes.some((p) => isUnder(e.p, p))) expected += e.s ?? 0;
      expect(sumFileSizes(file, prefixes)).toBe(expected);
    }
  });

  it('sumFileSizes, which reads only the lines outside the prefixes (binary searches), sums what a full read of the manifest and its overlay sums', () => {
    for (let seed = 200; seed < 215; seed++) {
      const rnd = rng(seed);
      const paths = randomTree(rnd, 1000 + rnd(3000));
      const file = path.join(dir, `sizes-overlay${seed}`);
      fs.writeFileSync(file, paths.map((p) => `${lineOf(p, rnd)}\n`).join(''));
      // An overlay: some base paths replaced, some removed (a subtree), some new ones, as stages leave it.
      const dirty = new Set([...paths.filter(() => rnd(20) === 0), ...randomTree(rnd, 30).filter(() => rnd(2) === 0)]);
      const removed = [...dirty].filter(() => rnd(4) === 0);
      const entries = [...dirty].filter((p) => !removed.includes(p)).sort(comparePaths).map((p) => JSON.parse(lineOf(p, rnd)) as ManifestEntry);
      fs.writeFileSync(overlayFile(file), formatOverlay(createHash('sha256').update(fs.readFileSync(file)).digest('hex'), dirty, removed, entries));
      const top = paths[rnd(paths.length)]!.split('/')[0]!;
      for (const prefixes of [[top], [top, paths[rnd(paths.length)]!], [NAMES[rnd(NAMES.length)]!, NAMES[rnd(NAMES.length)]!], ['']]) {
        let expected = 0;
        for (const e of readManifest(file)) if (e.t === 'f' && !prefixes.some((p) => isUnder(e.p, p))) expected += e.s ?? 0;
        expect(sumFileSizes(file, prefixes)).toBe(expected);
      }
    }
  });
});
