import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { applyOp } from '../../src/apply-changes.js';
import type { ChangeOp } from '../../src/changeset.js';
import { StagedrootError } from '../../src/errors.js';
import { RootFs } from '../../src/fs/trees/root-fs.js';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { readFileChunks } from '../../src/fs/trees/read-tree.js';
import { detectKind } from '../../src/sources/detect.js';
import { directorySource } from '../../src/sources/directory.js';
import { buildTree, hashTree, tempSysroot, type TempSysroot, type TreeSpec } from '../../src/testing/index.js';

const BASE: TreeSpec = {
  'etc/hostname': 'base\n',
  'etc/old.conf': 'old\n',
  'etc/app/a.conf': 'a\n',
  'srv/keep': 'keep\n',
};

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

async function rejection(p: Promise<unknown>): Promise<StagedrootError> {
  const e = await p.then(() => null, (err: unknown) => err);
  expect(e).toBeInstanceOf(StagedrootError);
  return e as StagedrootError;
}

describe('directory sources, applied like an uncompressed layer', () => {
  it('copies files, directories, links, modes and mtimes, and honours whiteouts', async () => {
    t = await tempSysroot({ tree: BASE });
    const src = buildTree(path.join(t.scratch, 'overlay'), {
      'etc/new.conf': { content: 'new\n', mode: 0o600 },
      'etc/.wh.old.conf': '',
      'etc/app/.wh..wh..opq': '',
      'etc/app/b.conf': 'b\n',
      'etc/systemd/system/system-systemd\\x2dfsck.slice': '[Slice]\n',
      'srv/link': { symlink: '../etc/new.conf' },
      'srv/abs': { symlink: '/etc/hostname' },
      'srv/one': 'shared\n',
      'srv/two': { hardlink: 'srv/one' },
      'srv/locked': { dir: true, mode: 0o700 },
    });
    fs.utimesSync(path.join(src, 'etc/new.conf'), 1_500_000_000, 1_500_000_000);
    expect(detectKind(src)).toBe('directory');
    const r = await t.sysroot.stage(src);
    const at = (p: string) => path.join(r.path, p);
    expect(fs.readFileSync(at('etc/new.conf'), 'utf8')).toBe('new\n');
    expect(fs.statSync(at('etc/new.conf')).mode & 0o7777).toBe(0o600);
    expect(Math.round(fs.statSync(at('etc/new.conf')).mtimeMs / 1000)).toBe(1_500_000_000);
    expect(fs.existsSync(at('etc/old.conf'))).toBe(false);
    expect(fs.readdirSync(at('etc/app'))).toEqual(['b.conf']);
    expect(fs.readFileSync(at('etc/systemd/system/system-systemd\\x2dfsck.slice'), 'utf8')).toBe('[Slice]\n');
    expect(fs.readlinkSync(at('srv/link'))).toBe('../etc/new.conf');
    expect(fs.readlinkSync(at('srv/abs'))).toBe('/etc/hostname');
    expect(fs.statSync(at('srv/two')).ino).toBe(fs.statSync(at('srv/one')).ino);
    expect(fs.statSync(at('srv/locked')).mode & 0o7777).toBe(0o700);
    expect(fs.readdirSync(at('var'))).toEqual([]); // the shared /var's mount point
    expect(fs.readFileSync(at('srv/keep'), 'utf8')).toBe('keep\n');
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    // The source directory itself is only read.
    expect(fs.existsSync(path.join(src, 'etc/.wh.old.conf'))).toBe(true);
  });

  it('with replace, makes the directory the whole tree', async () => {
    t = await tempSysroot({ tree: BASE });
    // var/: the staged tree has the shared /var's empty mount point
    const src = buildTree(path.join(t.scratch, 'rootfs'), { 'etc/hostname': 'new\n', 'usr/bin/sh': '#!\n', var: { dir: true } });
    const r = await t.sysroot.stage(directorySource(src, { replace: true }));
    expect(hashTree(r.path)).toBe(hashTree(src));
  });

  it('rejects FIFOs, sockets and symlinks that climb out, naming them, before writing', async () => {
    t = await tempSysroot({ tree: BASE });
    const canary = buildTree(path.join(t.scratch, 'canary'), { secret: 's\n' });
    const before = { booted: hashTree(t.sysroot.treePath(t.sysroot.status().booted!)), canary: hashTree(canary) };
    const src = buildTree(path.join(t.scratch, 'bad'), { 'srv/ok': 'ok\n', 'srv/out': { symlink: '../../../../../../../../..' + canary } });
    const fifo = await execa('mkfifo', [path.join(src, 'srv/fifo')], { reject: false });
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(path.join(src, 'srv/sock'), resolve));
    try {
      const err = await rejection(t.sysroot.stage(src));
      expect(err.isRejection).toBe(true);
      const found = err.issues.map((i) => `${i.code} ${i.path}`);
      if (fifo.failed) console.warn(`mkfifo unavailable (${fifo.shortMessage}): FIFO case not checked`);
      else expect(found).toContain('UNSAFE_ENTRY srv/fifo');
      expect(found).toContain('PATH_ESCAPE srv/out');
      expect(found).toContain('UNSAFE_ENTRY srv/sock');
      expect(err.message).toContain('srv/out');
    } finally {
      server.close();
    }
    expect({ booted: hashTree(t.sysroot.treePath(t.sysroot.status().booted!)), canary: hashTree(canary) }).toEqual(before);
    expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
  });

  it('checks again what it applies: a change between the passes cannot slip through', async () => {
    t = await tempSysroot({ tree: BASE });
    const src = buildTree(path.join(t.scratch, 'moving'), { 'srv/a': 'a\n', 'srv/swapped': '1234', 'srv/target': 'secret\n' });
    const cs = await directorySource(src).plan(new ReadOnlyTree(t.sysroot.treePath('0001')));
    // After the checks, a file becomes a symlink that climbs out: pass 2 checks it again.
    fs.rmSync(path.join(src, 'srv/swapped'));
    fs.symlinkSync('../../../../../../../../../etc', path.join(src, 'srv/swapped'));
    const dest = path.join(t.scratch, 'dest');
    fs.mkdirSync(dest);
    const root = new RootFs(dest);
    const err = await rejection(
      (async () => {
        for await (const op of cs.ops as AsyncIterable<ChangeOp>) await applyOp(root, op);
      })(),
    );
    expect(err.code).toBe('PATH_ESCAPE');
    expect(err.message).toContain('srv/swapped');
  });

  it('reads only the regular file it checked, of the size it checked', async () => {
    t = await tempSysroot({ tree: BASE });
    const src = buildTree(path.join(t.scratch, 'files'), { grows: '1234', target: 'secret\n' });
    // Grown after the walk counted 4 bytes: refused, not read on.
    fs.appendFileSync(path.join(src, 'grows'), 'more bytes than were checked');
    const e1 = await rejection((async () => { for await (const c of readFileChunks(path.join(src, 'grows'), 'grows', 4)) void c; })());
    expect(e1.code).toBe('SOURCE_CORRUPT');
    expect(e1.message).toContain('grows');
    // Swapped for a symlink between walk and open: not followed (O_NOFOLLOW).
    fs.symlinkSync(path.join(src, 'target'), path.join(src, 'swapped'));
    const e2 = await rejection((async () => { for await (const c of readFileChunks(path.join(src, 'swapped'), 'swapped', 7)) void c; })());
    expect(e2.code).toBe('SOURCE_CORRUPT');
    expect(e2.message).toContain('symbolic link');
  });
});
