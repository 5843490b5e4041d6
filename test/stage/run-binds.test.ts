import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RootFs } from '../../src/fs/trees/root-fs.js';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { makeBindMountPoints, removeBindMountPoints } from '../../src/stage/run-binds.js';

describe('the mount points of stage --run --bind', () => {
  let base: string;
  let host: string;
  let tree: string;
  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-binds-'));
    host = path.join(base, 'host');
    tree = path.join(base, 'tree');
    fs.mkdirSync(path.join(host, 'mnt/packages'), { recursive: true });
    fs.mkdirSync(path.join(host, 'srv/media/disk'), { recursive: true });
    fs.mkdirSync(path.join(tree, 'mnt'), { recursive: true });
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  it('makes only what the tree lacks, and takes exactly that away again', () => {
    const t = new RootFs(tree);
    const made = makeBindMountPoints(t, new ReadOnlyTree(host), ['/mnt/packages', '/srv/media/disk']);
    expect(made).toEqual(['mnt/packages', 'srv', 'srv/media', 'srv/media/disk']);
    expect(fs.statSync(path.join(tree, 'srv/media/disk')).isDirectory()).toBe(true);
    removeBindMountPoints(t, made);
    expect(fs.readdirSync(tree)).toEqual(['mnt']);
    expect(fs.readdirSync(path.join(tree, 'mnt'))).toEqual([]);
  });

  it('a symlink in the tree where a mount point goes is refused, and nothing is made through it', () => {
    const outside = path.join(base, 'outside');
    fs.mkdirSync(outside);
    fs.rmSync(path.join(tree, 'mnt'), { recursive: true });
    fs.symlinkSync(outside, path.join(tree, 'mnt'));
    expect(() => makeBindMountPoints(new RootFs(tree), new ReadOnlyTree(host), ['/mnt/packages'])).toThrow(/\/mnt in the new tree is a symbolic link/);
    expect(fs.readdirSync(outside)).toEqual([]);
    fs.rmSync(path.join(tree, 'mnt'));
    fs.writeFileSync(path.join(tree, 'mnt'), 'a file\n');
    expect(() => makeBindMountPoints(new RootFs(tree), new ReadOnlyTree(host), ['/mnt/packages'])).toThrow(/\/mnt in the new tree is not a directory/);
  });

  it('a directory the running system does not have is refused by name; under /tmp and /run nothing is made in the tree', () => {
    expect(() => makeBindMountPoints(new RootFs(tree), new ReadOnlyTree(host), ['/mnt/none'])).toThrow(/--bind \/mnt\/none: no such directory on the running system/);
    fs.mkdirSync(path.join(host, 'tmp/debs'), { recursive: true });
    expect(makeBindMountPoints(new RootFs(tree), new ReadOnlyTree(host), ['/tmp/debs'])).toEqual([]);
    expect(fs.existsSync(path.join(tree, 'tmp'))).toBe(false);
  });
});
