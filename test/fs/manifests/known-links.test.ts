import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { changesOf, type TouchEvent } from '../../../src/fs/manifests/patch-manifest.js';
import { formatEntry } from '../../../src/fs/manifests/manifest-line.js';
import { prng } from '../../helpers/random.js';

/**
 * changesOf's linksHold (a stage's own work tree): a path whose last event links a store
 * object is taken as that object's inode without an lstat of the object, unless an
 * ancestor was removed after the link (it may be a symlink now). The entries must be
 * byte for byte those of the pass that looks at each object.
 */
let dir: string;
let store: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-known-links-'));
  store = path.join(dir, 'store');
  fs.mkdirSync(store);
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function object(i: number): { host: string; sha256: string } {
  const host = path.join(store, `o${i}`);
  if (!fs.existsSync(host)) {
    const data = Buffer.from(`object ${i}\n`.repeat(i + 1));
    fs.writeFileSync(host, data, { mode: 0o644 });
    fs.utimesSync(host, 1_700_000_000 + i, 1_700_000_000 + i);
    if (i % 3 === 0) fs.chmodSync(host, 0o755);
  }
  return { host, sha256: createHash('sha256').update(fs.readFileSync(host)).digest('hex') };
}

function tree(): { root: RootFs; events: TouchEvent[]; dir: string } {
  const t = path.join(dir, 'tree');
  fs.mkdirSync(t);
  const events: TouchEvent[] = [];
  return { root: new RootFs(t, { cacheDirs: true, durability: 'deferred', onTouch: (e) => events.push(e) }), events, dir: t };
}

/** The fresh entries with and without linksHold, as manifest lines. */
function both(t: string, events: TouchEvent[]): [string[], string[]] {
  const lines = (linksHold: boolean): string[] => changesOf(t, events, undefined, { linksHold }).fresh.map(formatEntry);
  return [lines(false), lines(true)];
}

const link = (root: RootFs, p: string, i: number): void => {
  const o = object(i);
  root.linkFrom(p, o.host, { replace: true, sha256: o.sha256 });
};

describe('changesOf linksHold', () => {
  it('gives the lines of the pass that looks at each object', () => {
    const { root, events, dir: t } = tree();
    for (let i = 0; i < 20; i++) link(root, `usr/share/d${i % 4}/f${i}`, i);
    const [slow, fast] = both(t, events);
    expect(fast).toEqual(slow);
    expect(fast.filter((l) => l.includes('"t":"f"'))).toHaveLength(20);
  });

  it('a linked path under a directory replaced by a symlink since is read, not taken from its link', () => {
    const { root, events, dir: t } = tree();
    link(root, 'usr/a/f', 1);
    link(root, 'usr/b/f', 2);
    root.remove('usr/a', { recursive: true });
    root.symlink('usr/a', 'b');
    const [slow, fast] = both(t, events);
    expect(fast).toEqual(slow);
  });

  it('a linked path made private (setAttrs), hardlinked, removed and linked again', () => {
    const { root, events, dir: t } = tree();
    link(root, 'usr/x/f', 1);
    link(root, 'usr/x/g', 2);
    link(root, 'usr/x/h', 3);
    root.setAttrs('usr/x/f', { mode: 0o600 });
    root.link('usr/x/k', 'usr/x/g');
    root.clearDirectory('usr/x');
    link(root, 'usr/x/h', 4);
    const [slow, fast] = both(t, events);
    expect(fast).toEqual(slow);
  });

  it('random sequences of links, removals, symlinks over directories and opaque clears', () => {
    const rand = prng(29);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const dirs = ['usr/a', 'usr/b', 'usr/a/c', 'usr/b/c', 'etc'];
    for (let round = 0; round < 30; round++) {
      fs.rmSync(path.join(dir, 'tree'), { recursive: true, force: true });
      const { root, events, dir: t } = tree();
      for (let n = 0; n < 25; n++) {
        const d = pick(dirs);
        const file = `${d}/f${Math.floor(rand() * 3)}`;
        const r = rand();
        try {
          if (r < 0.5) link(root, file, Math.floor(rand() * 6));
          else if (r < 0.6) root.remove(d, { recursive: true, missingOk: true });
          else if (r < 0.7) root.symlink(d, pick(['../b', '../a', 'c', '/usr/b']), { replace: true });
          else if (r < 0.8) root.clearDirectory(d);
          else if (r < 0.9) root.link(file, `${pick(dirs)}/f${Math.floor(rand() * 3)}`, { replace: true });
          else root.setAttrs(file, { mode: 0o640 });
        } catch {
          // an op the tree refuses (a missing target): nothing written
        }
      }
      const [slow, fast] = both(t, events);
      expect(fast, `round ${round}`).toEqual(slow);
    }
  });
});
