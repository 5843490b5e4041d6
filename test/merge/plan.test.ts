/** The /etc 3-way merge plan as pure data: rows in, actions/conflicts out. */
import { describe, expect, it } from 'vitest';
import type { ManifestEntry } from '../../src/fs/manifests/manifest-line.js';
import { planMerge, type Row, type UpdatePaths } from '../../src/merge/plan.js';

const f = (p: string, h: string, m = 0o644): ManifestEntry => ({ p, t: 'f', m, u: 0, g: 0, s: 1, h: h.repeat(64).slice(0, 64) });
const d = (p: string, m = 0o755): ManifestEntry => ({ p, t: 'd', m, u: 0, g: 0 });
const row = (p: string, b: ManifestEntry | null, n: ManifestEntry | null, l: ManifestEntry | null): Row => ({ p, b, n, l });
const upd = (changed: Record<string, ManifestEntry['t']> = {}, removed: string[] = []): UpdatePaths => ({ changed: new Map(Object.entries(changed)), removed: new Set(removed) });

describe('merge plan', () => {
  it('carries local edits, additions and deletions on paths the update does not name; untouched paths follow the update', () => {
    const plan = planMerge([
      row('etc', d('etc'), d('etc'), d('etc')),
      row('etc/a', f('etc/a', 'a'), f('etc/a', 'a'), f('etc/a', 'b')), // edited after stage
      row('etc/b', f('etc/b', 'a'), f('etc/b', 'a'), null), // deleted after stage
      row('etc/c', null, null, f('etc/c', 'c')), // added after stage
      row('etc/m', f('etc/m', 'a'), f('etc/m', 'a'), f('etc/m', 'a', 0o600)), // mode changed
      row('etc/u', f('etc/u', 'a'), f('etc/u', 'z'), f('etc/u', 'a')), // the update's change, untouched locally
      row('etc/s', null, f('etc/s', 's'), null), // added before stage, deleted after: deleted
    ], upd({ 'etc/u': 'f' }), 'etc');
    expect(plan.actions).toEqual([
      { kind: 'carry', path: 'etc/a', replace: false },
      { kind: 'remove', path: 'etc/b' },
      { kind: 'carry', path: 'etc/c', replace: false },
      { kind: 'carry', path: 'etc/m', replace: false },
      { kind: 'remove', path: 'etc/s' },
    ]);
    expect(plan.carried).toBe(5);
    expect(plan.conflicts).toEqual([]);
    expect(plan.typeConflicts).toEqual([]);
  });

  it('the update wins on every path it names, changed content or not; the local version is kept (none for a deletion)', () => {
    const plan = planMerge([
      row('etc/x', f('etc/x', 'a'), f('etc/x', 'a'), f('etc/x', 'l')), // update rewrote it with the same content
      row('etc/y', f('etc/y', 'a'), f('etc/y', 'u'), null), // deleted locally, the update writes it
      row('etc/z', f('etc/z', 'a'), null, f('etc/z', 'l')), // the update removed it
      row('etc/w', f('etc/w', 'a'), f('etc/w', 'u'), f('etc/w', 'u')), // local made the update's change: nothing
    ], upd({ 'etc/x': 'f', 'etc/y': 'f', 'etc/w': 'f' }, ['etc/z']), 'etc');
    expect(plan.actions).toEqual([]);
    expect(plan.keep).toEqual(['etc/x', 'etc/z']);
    expect(plan.conflicts).toEqual([{ path: 'etc/x', kept: true }, { path: 'etc/y', kept: false }, { path: 'etc/z', kept: true }]);
  });

  it('below a directory the update removed or turned into a file, the update decides', () => {
    const plan = planMerge([
      row('etc/r', d('etc/r'), null, d('etc/r')),
      row('etc/r/local', null, null, f('etc/r/local', 'l')),
      row('etc/r/same', f('etc/r/same', 'a'), null, f('etc/r/same', 'a')),
    ], upd({}, ['etc/r']), 'etc');
    expect(plan.actions).toEqual([]);
    expect(plan.keep).toEqual(['etc/r/local']);
  });

  it('a local directory against an update file (or the reverse) is a type conflict', () => {
    const plan = planMerge([
      row('etc/a', null, f('etc/a', 'u'), d('etc/a')), // the update writes a file, the machine made a directory
      row('etc/a/x', null, null, f('etc/a/x', 'x')),
      row('etc/b', f('etc/b', 'a'), d('etc/b'), f('etc/b', 'l')), // the update made a directory, the machine edited the file
      row('etc/c', d('etc/c'), d('etc/c'), f('etc/c', 'l')), // the machine replaced a directory the update writes into
      row('etc/c/new', null, f('etc/c/new', 'u'), null),
    ], upd({ 'etc/a': 'f', 'etc/b': 'd', 'etc/c/new': 'f' }), 'etc');
    expect(plan.typeConflicts.map((c) => c.path)).toEqual(['etc/a', 'etc/b', 'etc/c']);
  });

  it('a local directory replacing a file the update left alone is carried, then its children; etc/.updated is cleared', () => {
    const plan = planMerge([
      row('etc/.updated', null, f('etc/.updated', 'a'), f('etc/.updated', 'a')),
      row('etc/d', f('etc/d', 'a'), f('etc/d', 'a'), d('etc/d')),
      row('etc/d/x', null, null, f('etc/d/x', 'x')),
      row('etc/e', d('etc/e'), d('etc/e'), f('etc/e', 'e')),
      row('etc/e/old', f('etc/e/old', 'o'), f('etc/e/old', 'o'), null),
    ], upd(), 'etc');
    expect(plan.actions).toEqual([
      { kind: 'remove', path: 'etc/.updated' },
      { kind: 'carry', path: 'etc/d', replace: true },
      { kind: 'carry', path: 'etc/d/x', replace: false },
      { kind: 'carry', path: 'etc/e', replace: true },
    ]);
  });
});
