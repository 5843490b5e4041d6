import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OverlayIo } from '../../../src/fs/trees/overlay-io.js';
import { readOnDisk } from '../../../src/fs/manifests/patch-manifest.js';
import { ReadOnlyTree } from '../../../src/fs/trees/read-only-tree.js';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { buildTree, hashTree } from '../../../src/testing/index.js';

const TREE = {
  'etc/hostname': 'tree-host\n',
  'etc/app/a.conf': 'a\n',
  'etc/app/b.conf': 'b\n',
  'etc/link': { symlink: 'hostname' },
  'etc/abs': { symlink: '/etc/app' },
  'srv/file': 'a file\n',
  'srv/dir/x': 'x\n',
  'srv/dir/sub/y': 'y\n',
  'usr/bin/tool': { content: 'tool\n', mode: 0o755 },
  'usr/bin/tool2': { hardlink: 'usr/bin/tool' },
};

type Step = [string, (r: RootFs) => unknown];

/** Each step as a RootFs call: the same calls on the disk and on an overlay must end alike. */
const STEPS: Step[] = [
  ['write a new file in a new directory', (r) => r.writeFile('etc/new/deep/n.conf', Buffer.from('n\n'), { mode: 0o600 })],
  ['overwrite a file', (r) => r.writeFile('etc/hostname', Buffer.from('other\n'))],
  ['write through an absolute symlink', (r) => r.writeFile('etc/abs/c.conf', Buffer.from('c\n'))],
  ['a file over a directory (EISDIR)', (r) => r.writeFile('srv/dir', Buffer.from('no\n'))],
  ['a directory over a file (EEXIST)', (r) => r.mkdir('srv/file')],
  ['below a regular file (ENOTDIR)', (r) => r.writeFile('srv/file/below', Buffer.from('no\n'))],
  ['overwrite: false over a file (EEXIST)', (r) => r.writeFile('etc/app/a.conf', Buffer.from('no\n'), { overwrite: false })],
  ['a file over a directory with replace', (r) => r.writeFile('srv/dir', Buffer.from('replaced\n'), { replace: true })],
  ['a directory again where it was', (r) => r.mkdir('srv/dir/again', { mode: 0o750 })],
  ['remove a non-empty directory without recursive (ENOTEMPTY)', (r) => r.remove('etc/app')],
  ['remove a missing path (ENOENT)', (r) => r.remove('etc/nothing')],
  ['symlink over a symlink', (r) => r.symlink('etc/link', 'app/a.conf')],
  ['hard link to a written file', (r) => r.link('etc/hard', 'etc/hostname')],
  ['hard link to a directory (EPERM)', (r) => r.link('etc/hard2', 'etc/app')],
  ['chmod a shared inode (a private copy)', (r) => r.setAttrs('usr/bin/tool', { mode: 0o700 })],
  ['append', (r) => r.appendFile('etc/app/b.conf', Buffer.from('more\n'))],
  ['clear a directory', (r) => r.clearDirectory('etc/app')],
  ['write into the cleared directory', (r) => r.writeFile('etc/app/d.conf', Buffer.from('d\n'))],
  ['remove a directory recursively', (r) => r.remove('srv', { recursive: true })],
  ['a directory where one was removed', (r) => r.mkdir('srv')],
  ['read back what was written', (r) => r.readFile('etc/new/deep/n.conf')?.toString()],
  ['list a merged directory', (r) => r.readOnly().readdir('etc')],
];

function outcome(fn: () => unknown): string {
  try {
    return `ok ${JSON.stringify(fn() ?? null)}`;
  } catch (err) {
    const e = err as { code?: string; errno?: string };
    return `error ${e.code} ${e.errno}`;
  }
}

/** Every entry of a tree as its manifest entry (less times and inode numbers), read through `view`. */
function entries(view: ReadOnlyTree, top: string[], entryOf: (rel: string) => unknown): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of (rel === '' ? top : view.readdir(rel)) ?? []) {
      const r = rel === '' ? name : `${rel}/${name}`;
      // Inode and ctime belong to the disk (the layer has its own): compare the rest.
      const { i: _i, c: _c, ...rest } = entryOf(r) as Record<string, unknown>;
      out.push(JSON.stringify(rest));
      if (view.lstat(r)?.isDirectory()) walk(r);
    }
  };
  walk('');
  return out;
}

describe('OverlayIo: RootFs over an in-memory layer behaves as RootFs on the disk', () => {
  let base: string;
  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-overlay-'));
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  it('the same calls give the same results, errors and final tree; the tree under the layer is not written', () => {
    const disk = buildTree(path.join(base, 'disk'), TREE);
    const lower = buildTree(path.join(base, 'lower'), TREE);
    const before = hashTree(lower);
    const io = new OverlayIo(lower);
    const real = new RootFs(disk);
    const over = new RootFs(lower, { io });
    const seen: string[] = [];
    for (const [name, step] of STEPS) {
      const want = outcome(() => step(real));
      expect(outcome(() => step(over)), name).toBe(want);
      seen.push(want);
    }
    // the refusals really happened (on both)
    for (const errno of ['EISDIR', 'EEXIST', 'ENOTDIR', 'ENOTEMPTY', 'ENOENT', 'EPERM']) expect(seen).toContain(`error APPLY_FAILED ${errno}`);
    // mtimes differ between two runs (a write takes "now"); the rest must be equal
    const strip = (e: Record<string, unknown> | null) => (e === null ? null : { ...e, mt: undefined });
    const onDisk = entries(new ReadOnlyTree(disk), fs.readdirSync(disk).sort(), (r) => strip(readOnDisk(disk, r)));
    const inLayer = entries(new ReadOnlyTree(lower, io), io.readdir(lower), (r) => strip(io.entry(r, `${lower}/${r}`)));
    expect(inLayer).toEqual(onDisk);
    expect(onDisk.length).toBeGreaterThan(10);
    expect(hashTree(lower)).toBe(before);
  });

  it('keeps only the size and hash of a large file: reading it back is an error, its entry is exact', () => {
    const lower = buildTree(path.join(base, 'lower'), TREE);
    const io = new OverlayIo(lower, { keepFileBytes: 1024 });
    const over = new RootFs(lower, { io });
    const big = Buffer.alloc(4096, 7);
    over.writeFile('big', big);
    expect(() => over.readFile('big')).toThrow(expect.objectContaining({ errno: 'EFBIG' }));
    const disk = buildTree(path.join(base, 'disk'), {});
    new RootFs(disk).writeFile('big', big);
    expect(io.entry('big', `${lower}/big`)!.h).toBe(readOnDisk(disk, 'big')!.h);
    expect(fs.existsSync(path.join(lower, 'big'))).toBe(false);
  });
});
