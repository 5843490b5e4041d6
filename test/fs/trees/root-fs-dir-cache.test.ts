import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RootFs } from '../../../src/fs/trees/root-fs.js';

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
});
