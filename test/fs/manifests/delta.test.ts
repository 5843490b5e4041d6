/**
 * verifyDelta checks what an update changed inside the staged tree. Found by the layer
 * property test (seed 1312938034): an image whose `etc` is a symlink to `/etc` removed the
 * base's etc/hostname, and the check, following the link, found the host's file "extra".
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyDelta } from '../../../src/fs/manifests/delta.js';
import { readEntry } from '../../../src/fs/manifests/manifest.js';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'delta-'));
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

describe('verifyDelta', () => {
  it('finds removed paths absent and changed ones missing when a symlink above them leads out of the tree', () => {
    const tree = path.join(base, 't1');
    const outside = path.join(base, 'host-etc');
    fs.mkdirSync(tree);
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'hostname'), 'host\n');
    fs.symlinkSync(outside, path.join(tree, 'etc'));
    const hostEntry = readEntry('etc/hostname', path.join(outside, 'hostname'), fs.lstatSync(path.join(outside, 'hostname')));
    expect(verifyDelta(tree, { changed: [], removed: ['etc/hostname'] })).toEqual([]);
    expect(verifyDelta(tree, { changed: [hostEntry], removed: [] })).toEqual([{ path: 'etc/hostname', kind: 'missing', expected: 'file' }]);
  });

  it('still finds a removed path present and a changed entry different', () => {
    const tree = path.join(base, 't2');
    fs.mkdirSync(path.join(tree, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(tree, 'etc/hostname'), 'a\n');
    const entry = readEntry('etc/hostname', path.join(tree, 'etc/hostname'), fs.lstatSync(path.join(tree, 'etc/hostname')));
    expect(verifyDelta(tree, { changed: [entry], removed: [] })).toEqual([]);
    expect(verifyDelta(tree, { changed: [], removed: ['etc/hostname'] }).map((d) => d.kind)).toEqual(['extra']);
    fs.writeFileSync(path.join(tree, 'etc/hostname'), 'bb\n');
    expect(verifyDelta(tree, { changed: [entry], removed: [] }).length).toBeGreaterThan(0);
  });
});
