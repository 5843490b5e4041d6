/**
 * manifestDelta: a stage's delta against its base manifest (an image's tree replaced
 * whole) read in diffManifests' one merge, the new manifest's entries carried along
 * instead of looked up again per path.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { diffManifests, manifestDelta } from '../../../src/fs/manifests/diff-manifests.js';
import { ManifestIndex } from '../../../src/fs/manifests/manifest-index.js';
import { ManifestWriter } from '../../../src/fs/manifests/manifest.js';
import type { ManifestEntry } from '../../../src/fs/manifests/manifest-line.js';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'diff-manifests-'));
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

function manifest(name: string, entries: ManifestEntry[]): string {
  const file = path.join(base, name);
  const w = new ManifestWriter(file);
  for (const e of entries) w.write(e);
  w.close(false);
  return file;
}

const dir = (p: string, m = 0o755): ManifestEntry => ({ p, t: 'd', m, u: 0, g: 0 });
const file = (p: string, h: string, m = 0o644): ManifestEntry => ({ p, t: 'f', m, u: 0, g: 0, s: 1, h: h.repeat(64) });

describe('manifestDelta', () => {
  it('gives the added and modified paths with the new manifest entries and the removed paths, as diffManifests and a lookup of each path would', () => {
    const a = manifest('a.ndjson', [dir('etc'), file('etc/a', '1'), file('etc/b', '2'), dir('usr'), file('usr/gone', '3'), { p: 'usr/l', t: 'l', m: 0o777, u: 0, g: 0, l: 'x' }]);
    const b = manifest('b.ndjson', [dir('etc', 0o700), file('etc/a', '1'), file('etc/b', '4'), file('etc/c', '5'), dir('usr'), { p: 'usr/l', t: 'l', m: 0o777, u: 0, g: 0, l: 'y' }, dir('var')]);
    const d = manifestDelta(a, b);
    const diff = diffManifests(a, b);
    const index = new ManifestIndex(b);
    try {
      expect(d.changed).toEqual(diff.filter((c) => c.change !== 'removed').map((c) => index.find(c.path)));
    } finally {
      index.close();
    }
    expect(d.changed.map((e) => e.p)).toEqual(['etc', 'etc/b', 'etc/c', 'usr/l', 'var']);
    expect(d.removed).toEqual(diff.filter((c) => c.change === 'removed').map((c) => c.path));
    expect(d.removed).toEqual(['usr/gone']);
  });

  it('is everything of the new manifest against an empty one', () => {
    const empty = manifest('empty.ndjson', []);
    const entries = [dir('usr'), dir('usr/share'), file('usr/share/f', 'a')];
    expect(manifestDelta(empty, manifest('full.ndjson', entries))).toEqual({ changed: entries, removed: [] });
  });
});
