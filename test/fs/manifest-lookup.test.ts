import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManifestWriter, type ManifestEntry } from '../../src/fs/manifest.js';
import { lookupEntries } from '../../src/fs/manifest-lookup.js';
import { comparePaths } from '../../src/fs/paths.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-lookup-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('lookupEntries', () => {
  it('finds exactly the entries a full read finds, for present and absent paths', () => {
    let seed = 3;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const parts = ['a', 'b', 'lib', 'x-y', 'é', 'z.conf', 'q"uote', 'long'];
    const paths = new Set<string>();
    while (paths.size < 3000) paths.add(Array.from({ length: 1 + rnd(4) }, () => parts[rnd(parts.length)]! + rnd(30)).join('/'));
    const sorted = [...paths].sort(comparePaths);
    const file = path.join(dir, 'm.ndjson');
    const w = new ManifestWriter(file);
    const all = new Map<string, ManifestEntry>();
    for (const p of sorted) {
      // Some lines far longer than the 4 KiB search window.
      const e: ManifestEntry = rnd(50) === 0 ? { p, t: 'l', m: 0o777, u: 0, g: 0, l: 't'.repeat(5000 + rnd(9000)) } : { p, t: 'd', m: 0o755, u: rnd(3), g: 0 };
      w.write(e);
      all.set(p, e);
    }
    w.close(false);
    const absent = Array.from({ length: 300 }, () => `${parts[rnd(parts.length)]}${rnd(40)}/nope${rnd(5)}`).filter((p) => !paths.has(p));
    const wanted = [...sorted.filter(() => rnd(10) === 0), ...absent, sorted[0]!, sorted[sorted.length - 1]!];
    const got = lookupEntries(file, wanted);
    for (const p of wanted) expect(got.get(p), p).toEqual(all.get(p));
  });

  it('handles an empty manifest and names a missing one', () => {
    const empty = path.join(dir, 'empty.ndjson');
    fs.writeFileSync(empty, '');
    expect(lookupEntries(empty, ['a']).size).toBe(0);
    expect(() => lookupEntries(path.join(dir, 'none.ndjson'), ['a'])).toThrow(/Cannot open manifest/);
  });
});
