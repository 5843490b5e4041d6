/**
 * lstatInTree: an entry is looked up inside its tree. A symlink above it (a tree whose
 * `etc` links to the host's `/etc`, or to a file) is not followed: the tree has no entry there.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lstatInTree } from '../../../src/fs/core/tree-lstat.js';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'tree-lstat-'));
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

const tree = path.join(base, 'tree');
const outside = path.join(base, 'outside');
fs.mkdirSync(path.join(tree, 'usr/lib'), { recursive: true });
fs.mkdirSync(outside);
fs.writeFileSync(path.join(outside, 'hostname'), 'host\n');
fs.writeFileSync(path.join(tree, 'usr/lib/os-release'), 'ID=x\n');
fs.writeFileSync(path.join(tree, 'file'), '');
fs.symlinkSync(outside, path.join(tree, 'etc'));
fs.symlinkSync('usr/lib', path.join(tree, 'lib'));

describe('lstatInTree', () => {
  it('finds entries under real directories, and the last component itself unfollowed', () => {
    expect(lstatInTree(tree, 'usr/lib/os-release')?.isFile()).toBe(true);
    expect(lstatInTree(tree, 'etc')?.isSymbolicLink()).toBe(true);
    expect(lstatInTree(tree, 'usr')?.isDirectory()).toBe(true);
  });

  it('answers null under a symlink (absolute or relative) or a file, where a host lstat answers', () => {
    expect(fs.lstatSync(path.join(tree, 'etc/hostname')).isFile()).toBe(true);
    expect(lstatInTree(tree, 'etc/hostname')).toBeNull();
    expect(fs.lstatSync(path.join(tree, 'lib/os-release')).isFile()).toBe(true);
    expect(lstatInTree(tree, 'lib/os-release')).toBeNull();
    expect(lstatInTree(tree, 'file/x')).toBeNull();
    expect(lstatInTree(tree, 'usr/none')).toBeNull();
  });

  it('remembers directories in a batch, and a cached directory is not a licence for its siblings', () => {
    const dirs = new Set<string>();
    expect(lstatInTree(tree, 'usr/lib/os-release', dirs)).not.toBeNull();
    expect([...dirs].sort()).toEqual(['usr', 'usr/lib']);
    expect(lstatInTree(tree, 'etc/hostname', dirs)).toBeNull();
    expect(dirs.has('etc')).toBe(false);
  });
});
