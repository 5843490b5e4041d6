import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { ReadOnlyTree } from '../../../src/fs/trees/read-only-tree.js';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import type { Source } from '../../../src/sources/source.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';

let base: string;
let tree: string;
beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-rotree-'));
  tree = buildTree(path.join(base, 'tree'), {
    'etc/passwd': 'root:x:0:0::/root:/bin/sh\n',
    'usr/lib/os-release': 'ID=test\n',
    'etc/os-release': { symlink: '../usr/lib/os-release' },
    'etc/abs-link': { symlink: '/usr/lib/os-release' },
    'etc/loop': { symlink: 'loop' },
    'etc/notadir': 'file\n',
    'var/empty': { dir: true },
  });
  fs.writeFileSync(path.join(base, 'outside'), 'host secret\n');
  fs.symlinkSync('../../outside', path.join(tree, 'etc/escape'));
  fs.symlinkSync('/', path.join(tree, 'rootlink'));
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

/** Methods a read-only tree may have: reads, and nothing else. */
const READS = ['constructor', 'resolve', 'lstat', 'stat', 'exists', 'readFile', 'readlink', 'readdir'];

describe('ReadOnlyTree', () => {
  it('reads with chroot semantics: absolute and relative links stay inside the tree', () => {
    const t = new ReadOnlyTree(tree);
    expect(t.readFile('etc/os-release')?.toString()).toBe('ID=test\n');
    expect(t.readFile('/etc/abs-link')?.toString()).toBe('ID=test\n');
    expect(t.readFile('rootlink/etc/passwd')?.toString()).toContain('root:x:0:0');
    // ../../outside from etc/ clamps at the tree's root: the host file is never read.
    expect(t.readFile('etc/escape')).toBeNull();
    expect(t.exists('etc/escape')).toBe(true);
    expect(t.exists('etc/escape', { follow: true })).toBe(false);
    expect(t.readlink('etc/abs-link')).toBe('/usr/lib/os-release');
    expect(t.readlink('etc/passwd')).toBeNull();
    expect(t.lstat('etc/os-release')?.isSymbolicLink()).toBe(true);
    expect(t.stat('etc/os-release')?.isFile()).toBe(true);
    expect(t.readdir('etc')).toEqual(['abs-link', 'escape', 'loop', 'notadir', 'os-release', 'passwd']);
    expect(t.readdir('var/empty')).toEqual([]);
    expect(t.readdir('etc/passwd')).toBeNull();
  });

  it('treats a missing path or a missing or non-directory parent as absent, and refuses loops, escapes and non-files', () => {
    const t = new ReadOnlyTree(tree);
    expect(t.readFile('etc/missing')).toBeNull();
    expect(t.lstat('no/such/dir/file')).toBeNull();
    expect(t.lstat('etc/notadir/child')).toBeNull();
    expect(t.readdir('nowhere')).toBeNull();
    expect(() => t.stat('etc/loop')).toThrow(StagedrootError);
    expect(() => t.readFile('etc/../../outside')).toThrow(/\.\./);
    expect(() => t.readFile('etc')).toThrow(/not a regular file/);
    expect(() => t.readFile('a/'.repeat(300) + 'x')).toThrow(expect.objectContaining({ code: 'UNSAFE_ENTRY' }));
  });

  it('has no method that writes, creates or removes, and cannot be given one', () => {
    const t = new ReadOnlyTree(tree);
    const methods = new Set<string>();
    for (let p: object | null = Object.getPrototypeOf(t); p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
      for (const name of Object.getOwnPropertyNames(p)) methods.add(name);
    }
    expect([...methods].sort()).toEqual([...READS].sort());
    expect(Object.keys(t)).toEqual(['root']);
    // Frozen: a write method cannot be attached to it afterwards.
    expect(Object.isFrozen(t)).toBe(true);
    expect(() => Object.assign(t, { writeFile: () => {} })).toThrow(TypeError);
    const before = hashTree(tree);
    for (const m of READS.filter((r) => r !== 'constructor' && r !== 'resolve')) {
      (t as unknown as Record<string, (p: string) => unknown>)[m]!('etc/passwd');
    }
    expect(hashTree(tree)).toBe(before);
  });

  it('is what RootFs hands to code that only reads, over the same tree', () => {
    const w = new RootFs(tree);
    const r = w.readOnly();
    expect(r).toBeInstanceOf(ReadOnlyTree);
    expect(r.root).toBe(w.root);
    w.writeFile('etc/new', Buffer.from('new\n'));
    expect(r.readFile('etc/new')?.toString()).toBe('new\n');
  });
});

/**
 * Type-level proof, checked by `tsc --noEmit` in `npm run lint`: a source's plan gets a
 * ReadOnlyTree, and calling any write on it is a compile error. If one of these lines
 * ever compiles (a write method added, or the base typed as RootFs), the unused
 * `@ts-expect-error` fails the lint.
 */
export const planThatTriesToWrite: Source = {
  kind: 'type-test',
  describe: 'a source that would write into the booted tree',
  async plan(base) {
    if (Math.random() > 2) {
      // @ts-expect-error ReadOnlyTree has no writeFile
      base.writeFile('etc/passwd', Buffer.from('x'));
      // @ts-expect-error ReadOnlyTree has no mkdir
      base.mkdir('etc/x');
      // @ts-expect-error ReadOnlyTree has no remove
      base.remove('etc/passwd');
      // @ts-expect-error ReadOnlyTree has no symlink
      base.symlink('etc/x', '/');
      // @ts-expect-error ReadOnlyTree has no setAttrs
      base.setAttrs('etc/passwd', { mode: 0o777 });
      // @ts-expect-error a ReadOnlyTree is not a RootFs
      const w: RootFs = base;
      void w;
    }
    return { description: 'nothing', ops: [] };
  },
};

describe('the type-level proof above', () => {
  it('is a real source whose plan runs (the writes are never reached)', async () => {
    const cs = await planThatTriesToWrite.plan(new ReadOnlyTree(tree));
    expect(cs.ops).toEqual([]);
  });
});
