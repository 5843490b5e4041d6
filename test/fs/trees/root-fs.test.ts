import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { normalizeTreePath } from '../../../src/fs/core/paths.js';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';

describe('RootFs: writes inside a tree with chroot semantics', () => {
  let base: string;
  let tree: string;
  /** A directory outside the tree that nothing may touch. */
  let canary: string;

  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-rootfs-'));
    tree = path.join(base, 'tree');
    canary = buildTree(path.join(base, 'canary'), { 'file': 'outside\n', 'dir/keep': 'outside\n' });
    buildTree(tree, { 'etc/hostname': 'tree-host\n', 'usr/lib/os-release': 'ID=tree\n' });
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  it('resolves an absolute symlink to /etc as the tree\'s own etc', () => {
    fs.symlinkSync('/etc', path.join(tree, 'conf'));
    const root = new RootFs(tree);
    expect(root.resolve('conf/hostname', { followLast: true }).hostPath).toBe(path.join(tree, 'etc', 'hostname'));
    expect(root.readFile('conf/hostname')!.toString()).toBe('tree-host\n');
    // Resolution never leaves the tree: the write itself is tested with a canary below.
    expect(root.resolve('/conf/motd', { createParents: true }).hostPath).toBe(path.join(tree, 'etc', 'motd'));
  });

  it('a self-referential etc -> /etc is a loop inside the tree, never the host /etc', () => {
    fs.rmSync(path.join(tree, 'etc'), { recursive: true });
    fs.symlinkSync('/etc', path.join(tree, 'etc'));
    const root = new RootFs(tree);
    expect(() => root.writeFile('etc/motd', Buffer.from('x'))).toThrow(expect.objectContaining({ code: 'APPLY_FAILED', errno: 'ELOOP', path: 'etc/motd' }));
    expect(() => root.readFile('etc/hostname')).toThrow(expect.objectContaining({ errno: 'ELOOP' }));
  });

  it('writes through an absolute symlink land inside the tree, not at the host path it names', () => {
    // The link names a real host directory: followed on the host, the write would land there.
    fs.symlinkSync(canary, path.join(tree, 'out'));
    const before = hashTree(canary);
    new RootFs(tree).writeFile('out/file', Buffer.from('inside\n'));
    expect(hashTree(canary)).toBe(before);
    expect(fs.readFileSync(path.join(tree, canary, 'file'), 'utf8')).toBe('inside\n');
  });

  it('".." in a symlink target stops at the root', () => {
    fs.symlinkSync('../../../../../..', path.join(tree, 'usr', 'up'));
    fs.symlinkSync('../../../../etc', path.join(tree, 'usr', 'lib', 'e'));
    const root = new RootFs(tree);
    expect(root.resolve('usr/up/etc/hostname').hostPath).toBe(path.join(tree, 'etc', 'hostname'));
    expect(root.resolve('usr/lib/e/hostname').hostPath).toBe(path.join(tree, 'etc', 'hostname'));
    root.writeFile('usr/up/etc/new', Buffer.from('n\n'));
    expect(fs.readFileSync(path.join(tree, 'etc', 'new'), 'utf8')).toBe('n\n');
    expect(root.resolve('usr/up').rel).toBe('usr/up'); // the final link itself is not followed
  });

  it('rejects a source path with ".." or a NUL, naming it; a backslash is an ordinary name byte here', () => {
    const root = new RootFs(tree);
    expect(() => root.writeFile('etc/../../x', Buffer.from(''))).toThrow(expect.objectContaining({ code: 'PATH_ESCAPE', path: 'etc/../../x' }));
    expect(() => root.writeFile('etc/a\0b', Buffer.from(''))).toThrow(expect.objectContaining({ code: 'PATH_ESCAPE' }));
    // Real trees hold names like system-systemd\x2dfsck.slice; documents (specs, Ignition) refuse backslashes earlier.
    root.writeFile('etc\\x', Buffer.from('b'));
    expect(fs.readFileSync(path.join(tree, 'etc\\x'), 'utf8')).toBe('b');
    expect(() => normalizeTreePath('etc\\x')).toThrow(expect.objectContaining({ code: 'PATH_ESCAPE' }));
    expect(() => root.writeFile('/', Buffer.from(''))).toThrow(expect.objectContaining({ code: 'PATH_ESCAPE' }));
  });

  it('does not follow a final symlink (O_NOFOLLOW): a write replaces the link, its target is untouched', () => {
    fs.symlinkSync(path.join(canary, 'file'), path.join(tree, 'etc', 'link'));
    fs.symlinkSync('/etc/hostname', path.join(tree, 'etc', 'inner'));
    const before = hashTree(canary);
    const root = new RootFs(tree);
    root.writeFile('etc/link', Buffer.from('new\n'));
    root.writeFile('etc/inner', Buffer.from('new\n'));
    expect(fs.lstatSync(path.join(tree, 'etc', 'link')).isFile()).toBe(true);
    expect(fs.lstatSync(path.join(tree, 'etc', 'inner')).isFile()).toBe(true);
    expect(fs.readFileSync(path.join(tree, 'etc', 'hostname'), 'utf8')).toBe('tree-host\n');
    expect(hashTree(canary)).toBe(before);
    // remove and setAttrs act on the link, not on what it points to
    fs.symlinkSync(path.join(canary, 'file'), path.join(tree, 'etc', 'link2'));
    root.setAttrs('etc/link2', { mode: 0o600 });
    root.remove('etc/link2');
    expect(hashTree(canary)).toBe(before);
  });

  it('names the path and ENOTDIR when a parent is a regular file', () => {
    buildTree(tree, { 'home/core/test': 'a file\n' });
    const before = hashTree(tree);
    const err = (() => {
      try {
        new RootFs(tree).writeFile('home/core/test/test', Buffer.from('x'));
      } catch (e) {
        return e;
      }
    })();
    expect(err).toMatchObject({ code: 'APPLY_FAILED', errno: 'ENOTDIR', path: 'home/core/test/test' });
    expect(String((err as Error).message)).toContain('home/core/test is not a directory');
    expect(hashTree(tree)).toBe(before);
  });

  describe('an inode shared with another deployment (hardlinked usr/)', () => {
    let other: string;
    beforeEach(() => {
      other = path.join(base, 'other');
      fs.mkdirSync(path.join(other, 'usr', 'lib'), { recursive: true });
      fs.linkSync(path.join(tree, 'usr', 'lib', 'os-release'), path.join(other, 'usr', 'lib', 'os-release'));
      expect(fs.statSync(path.join(other, 'usr', 'lib', 'os-release')).nlink).toBe(2);
    });

    function otherFile(): { ino: number; mode: number; nlink: number; text: string } {
      const p = path.join(other, 'usr', 'lib', 'os-release');
      const st = fs.statSync(p);
      return { ino: st.ino, mode: st.mode & 0o7777, nlink: st.nlink, text: fs.readFileSync(p, 'utf8') };
    }

    it('a write replaces the file and never modifies the other deployment', () => {
      const before = otherFile();
      new RootFs(tree).writeFile('usr/lib/os-release', Buffer.from('ID=new\n'));
      expect(fs.readFileSync(path.join(tree, 'usr', 'lib', 'os-release'), 'utf8')).toBe('ID=new\n');
      expect(otherFile()).toEqual({ ...before, nlink: 1 });
    });

    it('an append writes a new inode too', () => {
      const before = otherFile();
      new RootFs(tree).appendFile('usr/lib/os-release', Buffer.from('VERSION=2\n'));
      expect(fs.readFileSync(path.join(tree, 'usr', 'lib', 'os-release'), 'utf8')).toBe('ID=tree\nVERSION=2\n');
      expect(otherFile()).toEqual({ ...before, nlink: 1 });
    });

    it('setAttrs copies the file first, then changes the copy', () => {
      const before = otherFile();
      new RootFs(tree).setAttrs('usr/lib/os-release', { mode: 0o600 });
      const mine = fs.statSync(path.join(tree, 'usr', 'lib', 'os-release'));
      expect(mine.mode & 0o7777).toBe(0o600);
      expect(mine.ino).not.toBe(before.ino);
      expect(fs.readFileSync(path.join(tree, 'usr', 'lib', 'os-release'), 'utf8')).toBe('ID=tree\n');
      expect(otherFile()).toEqual({ ...before, nlink: 1 });
    });

    it('an unshared file is changed in place', () => {
      const p = path.join(tree, 'etc', 'hostname');
      const ino = fs.statSync(p).ino;
      new RootFs(tree).setAttrs('etc/hostname', { mode: 0o640 });
      expect(fs.statSync(p)).toMatchObject({ ino });
      expect(fs.statSync(p).mode & 0o7777).toBe(0o640);
    });
  });

  it('reports every mutating call to the fault hook and every touched path', () => {
    const calls: string[] = [];
    const touched: string[] = [];
    const root = new RootFs(tree, { faults: { afterMutation: (op, p) => calls.push(`${op} ${path.relative(tree, p).replace(/stagedroot-tmp-.*/, 'TMP')}`) }, onTouch: (e) => touched.push(`${e.kind} ${e.path}`) });
    root.writeFile('srv/www/index.html', Buffer.from('hi'), { mode: 0o640 });
    root.remove('etc/hostname');
    expect(calls).toEqual(['mkdir srv', 'mkdir srv/www', 'create srv/www/.TMP', 'rename srv/www/index.html', 'remove etc/hostname']);
    expect(touched).toEqual(['touch srv', 'touch srv/www', 'touch srv/www/index.html', 'remove etc/hostname']);
    expect(fs.statSync(path.join(tree, 'srv', 'www', 'index.html')).mode & 0o7777).toBe(0o640);
    expect(fs.readdirSync(path.join(tree, 'srv', 'www'))).toEqual(['index.html']);
  });
});
