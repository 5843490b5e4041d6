import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { entryFromStat, ManifestReader, ManifestWriter, readManifest } from '../../../src/fs/manifests/manifest.js';
import { LINE_HEAD, asciiPathEnd, checkEntry, cheapPath, formatEntry, isFileLineFor, lineSize, manifestEntrySchema, parseManifestLine, sumSizes } from '../../../src/fs/manifests/manifest-line.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-manifest-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const H = 'ab'.repeat(32);

describe('checkEntry (the hand-written schema check)', () => {
  it('accepts exactly what the zod schema accepts, and returns what zod returns', () => {
    const values: unknown[] = [undefined, null, 0, -1, 1.5, 420, 0o7777, 0o10000, 2 ** 32, '', 'x', 'f', 'd', 'l', 'o', H, H.toUpperCase(), true, [], {}];
    const keys = ['p', 't', 'm', 'u', 'g', 's', 'h', 'l', 'mt', 'i', 'c', 'x', '__proto__'];
    let seed = 11;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const good = { p: 'usr/a', t: 'f', m: 420, u: 0, g: 0, s: 3, h: H, mt: 1, i: 9, c: 1_700_000_000_000_001 };
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < 5_000; i++) {
      // Start from a valid entry and break a few fields, so both outcomes are common.
      const text = JSON.stringify(good);
      const o = JSON.parse(text) as Record<string, unknown>;
      for (let k = rnd(3); k > 0; k--) {
        const key = keys[rnd(keys.length)]!;
        const v = values[rnd(values.length)];
        if (v === undefined) delete o[key];
        else o[key] = v;
      }
      const raw = JSON.parse(JSON.stringify(o)) as unknown;
      const z = manifestEntrySchema.safeParse(raw);
      const fast = checkEntry(raw);
      if (fast === null) {
        refused += 1; // zod decides (and words the error)
        continue;
      }
      accepted += 1;
      if (!z.success) throw new Error(`checkEntry accepted what zod refuses: ${JSON.stringify(raw)}`);
      if (JSON.stringify(fast) !== JSON.stringify(z.data)) throw new Error(`checkEntry and zod differ on ${JSON.stringify(raw)}`);
    }
    expect(accepted).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(500);
    expect(checkEntry(JSON.parse('{"p":"a","t":"f","m":1,"u":0,"g":0,"__proto__":1}'))).toBeNull();
    expect(checkEntry([1])).toBeNull();
  });
});

describe('ManifestReader', () => {
  it('decodes multi-byte paths that straddle its 1 MiB read chunks', () => {
    // Pad the first line until byte 1 MiB falls inside a 4-byte character.
    for (let pad = 0; pad < 160; pad += 7) {
      const file = path.join(dir, `utf8-${pad}.ndjson`);
      const w = new ManifestWriter(file);
      const names = ['a' + 'x'.repeat(pad)];
      for (let i = 0; i < 12_000; i++) names.push(`d/${String(i).padStart(6, '0')}-${'\u{1F600}'.repeat(8)}`);
      for (const p of names) w.write({ p, t: 'f', m: 0o644, u: 0, g: 0, s: 1, h: H, mt: 5 });
      w.close(false);
      const bytes = fs.readFileSync(file);
      if ((bytes[1 << 20]! & 0xc0) !== 0x80) continue;
      expect([...readManifest(file)].map((e) => e.p)).toEqual(names);
      return;
    }
    throw new Error('no padding put a character across the chunk boundary');
  });

  it('reads a line longer than its read buffer', () => {
    const file = path.join(dir, 'long.ndjson');
    const target = 'x'.repeat(3 << 20);
    const w = new ManifestWriter(file);
    w.write({ p: 'a', t: 'l', m: 0o777, u: 0, g: 0, l: target });
    w.write({ p: 'b', t: 'd', m: 0o755, u: 0, g: 0 });
    w.close(false);
    expect([...readManifest(file)].map((e) => [e.p, e.l?.length])).toEqual([['a', target.length], ['b', undefined]]);
  });

  it('reads the path of escaped or duplicated keys as JSON.parse does', () => {
    const file = path.join(dir, 'odd.ndjson');
    fs.writeFileSync(file, ['{"p":"a\\"b","t":"d","m":493,"u":0,"g":0}', '{"p":"a0","p":"b","t":"d","m":493,"u":0,"g":0}', '{"t":"d","p":"c","m":493,"u":0,"g":0}'].join('\n') + '\n');
    const r = new ManifestReader(file);
    expect([r.nextRaw()!.p, r.nextRaw()!.p, r.nextRaw()!.p, r.nextRaw()]).toEqual(['a"b', 'b', 'c', null]);
  });

  it('still rejects a corrupt line that seekRaw passes over, naming its line', () => {
    const file = path.join(dir, 'bad.ndjson');
    fs.writeFileSync(file, ['{"p":"a","t":"d","m":99999,"u":0,"g":0}', `{"p":"b","t":"f","m":420,"u":0,"g":0,"s":1,"h":"${H}","mt":1}`].join('\n') + '\n');
    const r = new ManifestReader(file);
    expect(() => r.seekRaw('b')).toThrow(/line 1 is invalid/);
  });
});

describe('isFileLineFor', () => {
  it('matches exactly the line ManifestWriter writes for that file and stat', () => {
    const f = path.join(dir, 'file "q" é');
    fs.writeFileSync(f, 'abc');
    const st = fs.lstatSync(f);
    const rel = 'etc/file "q" é';
    const line = JSON.stringify(entryFromStat(rel, st, { h: H }));
    expect(isFileLineFor(line, rel, st)).toBe(true);
    expect(isFileLineFor(line.replace(H, H.toUpperCase()), rel, st)).toBe(false);
    expect(isFileLineFor(JSON.stringify(entryFromStat(rel, { ...st, size: 4, isFile: () => true, isDirectory: () => false, isSymbolicLink: () => false } as fs.Stats, { h: H })), rel, st)).toBe(false);
    expect(isFileLineFor(line, 'etc/other', st)).toBe(false);
  });
});

describe('the line codec: its peeks read what a parse reads', () => {
  it('cheapPath, lineSize, asciiPathEnd and sumSizes agree with parseManifestLine on random lines', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const names = ['etc', 'a b', 'q"uote', 'back\\slash', 'caf\u00e9', '\udce9raw', 'tab\t', '"s":9', '"h":"x'];
    const lines: string[] = [];
    let total = 0;
    for (let k = 0; k < 2_000; k++) {
      const p = Array.from({ length: 1 + rnd(3) }, () => names[rnd(names.length)]!).join('/');
      const t = (['f', 'd', 'l'] as const)[rnd(3)]!;
      const e = t === 'f' ? { p, t, m: 0o644, u: 0, g: 0, s: rnd(1e6), h: H, mt: rnd(1e9), i: rnd(1e6), c: rnd(1e9) } : t === 'l' ? { p, t, m: 0o777, u: 0, g: 0, l: names[rnd(names.length)]! } : { p, t, m: 0o755, u: 0, g: 0 };
      const line = formatEntry(e);
      const parsed = parseManifestLine(line, 'm', `line ${k}`);
      expect(formatEntry(parsed)).toBe(line); // byte for byte, both ways
      expect(cheapPath(line) ?? parsed.p).toBe(parsed.p);
      expect(lineSize(line)).toBe(parsed.s ?? 0);
      const b = Buffer.from(line);
      const end = asciiPathEnd(b, 0, b.length);
      if (end !== -1) expect(b.toString('latin1', LINE_HEAD.length, end)).toBe(parsed.p);
      lines.push(line);
      total += parsed.s ?? 0;
    }
    const all = Buffer.from(lines.join('\n') + '\n');
    expect(sumSizes(all, 0, all.length)).toBe(total);
  });
});
