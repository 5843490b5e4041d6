/**
 * quickParse (src/sources/ignition/quick-parse.ts), the Ignition check's path without zod:
 * on documents of its shape it returns exactly what ignitionSchema's parse returns (the
 * same values, keys in the same order), and on every document zod refuses, or of another
 * shape, it returns null (zod decides). Random documents near the edge of each field.
 */
import { describe, expect, it } from 'vitest';
import { ignitionSchema } from '../../../src/sources/ignition/schema.js';
import { quickParse } from '../../../src/sources/ignition/quick-parse.js';

function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s >>> 8) % n;
  };
}

const pick = <T>(rnd: (n: number) => number, xs: readonly T[]): T => xs[rnd(xs.length)]!;
const PATHS = ['/etc/motd', '/usr/share/d1/f2', 'etc/relative', '/', '//etc//x/./y', '/etc/../x', '/etc/a\\b', '/etc/nul\0', '/' + 'a/'.repeat(300) + 'deep', ''];
const SOURCES = ['data:,hello', 'data:;base64,aGk=', 'https://example.com/x', '', 42, undefined];
const HASHES = ['sha256-' + 'a'.repeat(64), 'sha512-' + 'B'.repeat(128), 'sha256-abc', 'md5-x', 7];
const MODES = [0o644, 0o7777, 0o10000, -1, 1.5, '644', 0];

function randomResource(rnd: (n: number) => number): unknown {
  if (rnd(20) === 0) return pick(rnd, ['x', null, [], 3]);
  const r: Record<string, unknown> = {};
  const source = pick(rnd, SOURCES);
  if (source !== undefined) r.source = source;
  if (rnd(4) === 0) r.compression = pick(rnd, ['', 'gzip', 'xz']);
  if (rnd(4) === 0) r.verification = rnd(6) === 0 ? { hash: pick(rnd, HASHES), other: 1 } : rnd(5) === 0 ? {} : { hash: pick(rnd, HASHES) };
  if (rnd(25) === 0) r.httpHeaders = [];
  return r;
}

function randomFile(rnd: (n: number) => number): unknown {
  if (rnd(30) === 0) return pick(rnd, ['/etc/x', null, 5]);
  const f: Record<string, unknown> = { path: rnd(6) === 0 ? pick(rnd, PATHS) : `/usr/share/d${rnd(50)}/f${rnd(100)}` };
  if (rnd(2) === 0) f.overwrite = rnd(10) === 0 ? 'yes' : rnd(2) === 0;
  if (rnd(5) !== 0) f.contents = randomResource(rnd);
  if (rnd(2) === 0) f.mode = pick(rnd, MODES);
  if (rnd(15) === 0) f.user = pick(rnd, [{ id: 0 }, { name: 'root' }, { id: 1, name: 'x' }]);
  if (rnd(20) === 0) f.append = [randomResource(rnd)];
  if (rnd(40) === 0) f.unknown = true;
  return f;
}

function randomDoc(rnd: (n: number) => number): unknown {
  const doc: Record<string, unknown> = { ignition: rnd(15) === 0 ? { version: pick(rnd, ['3.4.0', '2.2.0', 3]), extra: rnd(2) === 0 ? 1 : undefined } : { version: pick(rnd, ['3.0.0', '3.4.0', '3.6.0', '3.7.0']) } };
  if (rnd(8) !== 0) {
    const storage: Record<string, unknown> = {};
    if (rnd(10) !== 0) storage.files = rnd(25) === 0 ? 'files' : Array.from({ length: rnd(6) }, () => randomFile(rnd));
    if (rnd(12) === 0) storage.directories = [{ path: '/etc/d' }];
    doc.storage = storage;
  }
  if (rnd(12) === 0) doc.systemd = { units: [] };
  return doc;
}

describe('quickParse', () => {
  it('returns what ignitionSchema parses, or null wherever zod refuses or the shape is another (random documents)', () => {
    let quick = 0;
    let refused = 0;
    for (let seed = 1; seed <= 3000; seed++) {
      const doc = randomDoc(rng(seed));
      const q = quickParse(doc);
      const z = ignitionSchema.safeParse(doc);
      if (!z.success) {
        refused += 1;
        expect(q, JSON.stringify(doc)).toBeNull();
      } else if (q !== null) {
        quick += 1;
        expect(JSON.stringify(q)).toBe(JSON.stringify(z.data));
        expect(q).toEqual(z.data);
      }
    }
    // Both sides are exercised: documents taken without zod, and documents zod refuses.
    expect(quick).toBeGreaterThan(300);
    expect(refused).toBeGreaterThan(300);
  });

  it('takes the document of a 200-file update (the stage bench\'s) without zod', () => {
    const doc = { ignition: { version: '3.4.0' }, storage: { files: Array.from({ length: 200 }, (_, i) => ({ path: `/usr/share/d${i}/f`, overwrite: true, mode: 0o644, contents: { source: `data:,${i}` } })) } };
    expect(quickParse(doc)).toEqual(ignitionSchema.parse(doc));
  });
});
