import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { hostIo, type TreeIo } from '../../../src/fs/trees/tree-io.js';

/**
 * RootFs's cache of real directories (cacheDirs: a stage's work tree) never outlives a
 * directory: once one is removed, replaced or renamed away, a path through its name is
 * resolved again, so a symlink put there is followed inside the root as without a cache.
 */
let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-dir-cache-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The same writes with and without the cache give the same tree. */
function both(ops: (root: RootFs) => void): void {
  const trees = [true, false].map((cacheDirs) => {
    const t = path.join(dir, String(cacheDirs));
    fs.mkdirSync(t);
    ops(new RootFs(t, { cacheDirs, durability: 'deferred' }));
    return t;
  });
  expect(listing(trees[0]!)).toEqual(listing(trees[1]!));
}

function listing(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const n of fs.readdirSync(path.join(root, rel)).sort()) {
      const r = rel === '' ? n : `${rel}/${n}`;
      const st = fs.lstatSync(path.join(root, r));
      out.push(`${r} ${st.isDirectory() ? 'd' : st.isSymbolicLink() ? `-> ${fs.readlinkSync(path.join(root, r))}` : fs.readFileSync(path.join(root, r), 'utf8')}`);
      if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  return out;
}

describe('RootFs cacheDirs', () => {
  it('a removed directory replaced by a symlink is followed (inside the root), not taken as the cached directory', () => {
    both((root) => {
      root.writeFile('a/b/f', Buffer.from('1'));
      root.remove('a', { recursive: true });
      root.mkdir('elsewhere');
      root.symlink('a', '/elsewhere');
      root.writeFile('a/b/g', Buffer.from('2'));
    });
    const t = path.join(dir, 'true');
    expect(fs.readFileSync(path.join(t, 'elsewhere/b/g'), 'utf8')).toBe('2');
    expect(fs.lstatSync(path.join(t, 'a')).isSymbolicLink()).toBe(true);
  });

  it('a directory replaced by a symlink (OCI replace), a cleared parent and a write under it again', () => {
    both((root) => {
      root.writeFile('usr/lib/x/one', Buffer.from('1'));
      root.mkdir('lib2');
      root.symlink('usr/lib', '../lib2', { replace: true });
      root.writeFile('usr/lib/x/two', Buffer.from('2'));
      root.clearDirectory('usr');
      root.writeFile('usr/lib/x/three', Buffer.from('3'));
    });
    const t = path.join(dir, 'true');
    expect(fs.readFileSync(path.join(t, 'lib2/x/two'), 'utf8')).toBe('2');
    expect(fs.lstatSync(path.join(t, 'usr/lib')).isDirectory()).toBe(true);
  });

  it('realPath follows a symlink made where a cached directory was', () => {
    const t = path.join(dir, 'r');
    fs.mkdirSync(t);
    const root = new RootFs(t, { cacheDirs: true, durability: 'deferred' });
    root.writeFile('home/core/f', Buffer.from('x'));
    expect(root.realPath('home/core/f')).toBe('home/core/f');
    root.remove('home', { recursive: true });
    root.symlink('home', 'var/home');
    expect(root.realPath('home/core/f')).toBe('var/home/core/f');
  });

  it('linkFrom into a known directory links the object; a name already there, a directory made a symlink, and a refused link go the resolving way', () => {
    const obj = path.join(dir, 'object');
    fs.writeFileSync(obj, 'obj');
    const touched: string[][] = [];
    const trees = [true, false].map((cacheDirs) => {
      const t = path.join(dir, `link-${cacheDirs}`);
      fs.mkdirSync(t);
      const events: string[] = [];
      touched.push(events);
      const root = new RootFs(t, { cacheDirs, durability: 'deferred', onTouch: (e) => events.push(`${e.kind} ${e.path}`) });
      root.mkdir('usr/share/d', { mode: 0o755 });
      expect(root.linkFrom('usr/share/d/new', obj, { replace: true })).toBe(true);
      // Something at the name: a file, a dangling symlink, a directory with a child.
      root.writeFile('usr/share/d/file', Buffer.from('old'));
      root.symlink('usr/share/d/dangling', 'nowhere');
      root.writeFile('usr/share/d/dir/child', Buffer.from('c'));
      for (const n of ['file', 'dangling', 'dir']) expect(root.linkFrom(`usr/share/d/${n}`, obj, { replace: true })).toBe(true);
      for (const n of ['new', 'file', 'dangling', 'dir']) expect(fs.lstatSync(path.join(t, 'usr/share/d', n)).ino).toBe(fs.statSync(obj).ino);
      // The known directory replaced by a symlink into the tree: the link lands through it.
      root.mkdir('other');
      root.symlink('usr/share/d', '/other', { replace: true });
      expect(root.linkFrom('usr/share/d/via', obj, { replace: true })).toBe(true);
      // Where linkAt says no, a copy (a new inode), as without the cache.
      root.mkdir('etc');
      expect(root.linkFrom('etc/copied', obj, { replace: true, linkAt: (rel) => !rel.startsWith('etc/') })).toBe(false);
      return t;
    });
    expect(listing(trees[0]!)).toEqual(listing(trees[1]!));
    expect(touched[0]).toEqual(touched[1]);
    const t = trees[0]!;
    const ino = fs.statSync(obj).ino;
    expect(fs.lstatSync(path.join(t, 'other/via')).ino).toBe(ino);
    expect(fs.readdirSync(path.join(t, 'other'))).toEqual(['via']);
    expect(fs.lstatSync(path.join(t, 'etc/copied')).ino).not.toBe(ino);
    expect(fs.readFileSync(path.join(t, 'etc/copied'), 'utf8')).toBe('obj');
  });

  it('linkFrom of a new name in a directory it made is one link(): the name is not resolved (no lstat) first', () => {
    const obj = path.join(dir, 'object');
    fs.writeFileSync(obj, 'obj');
    const t = path.join(dir, 'count');
    fs.mkdirSync(t);
    const lstats: string[] = [];
    const io: TreeIo = { ...hostIo, lstat: (p) => (lstats.push(p), hostIo.lstat(p)) };
    const root = new RootFs(t, { cacheDirs: true, durability: 'deferred', io });
    root.mkdir('usr/share/d');
    lstats.length = 0;
    for (const n of ['a', 'b', 'c']) expect(root.linkFrom(`usr/share/d/${n}`, obj, { replace: true })).toBe(true);
    expect(lstats).toEqual([]);
    expect(fs.readdirSync(path.join(t, 'usr/share/d')).sort()).toEqual(['a', 'b', 'c']);
  });
});
