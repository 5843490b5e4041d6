import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangeOp } from '../../../src/changeset.js';
import { StagedrootError } from '../../../src/errors.js';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { ReadOnlyTree } from '../../../src/fs/trees/read-only-tree.js';
import { applyOp } from '../../../src/apply-changes.js';
import { detectKind, sourceFromPath } from '../../../src/sources/detect.js';
import { tarLayerSource } from '../../../src/sources/tar/layer-source.js';
import { hashTree, tempSysroot, type TempSysroot, type TreeSpec } from '../../../src/testing/index.js';
import { gzip, tarArchive, type TarEntry } from '../../../fixtures/tar-writer.mjs';

const BASE: TreeSpec = {
  'etc/hostname': 'base\n',
  'etc/old.conf': 'old\n',
  'etc/app/a.conf': 'a\n',
  'etc/app/b.conf': 'b\n',
  'srv/data/keep': 'keep\n',
  'srv/was-dir/child': 'c\n',
  'srv/was-file': 'f\n',
  'srv/was-link-target': 'target\n',
  'srv/was-link': { symlink: 'was-link-target' },
  'opt/tool/bin/run': '#!/bin/sh\n',
  'usr/bin/tool': 'tool\n',
};

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

function writeLayer(s: TempSysroot, name: string, entries: TarEntry[], o: { gz?: boolean } = {}): string {
  const file = path.join(s.scratch, name);
  const tar = tarArchive(entries);
  fs.writeFileSync(file, o.gz ? gzip(tar) : tar);
  return file;
}

const st = (root: string, p: string) => fs.lstatSync(path.join(root, p));
const read = (root: string, p: string) => fs.readFileSync(path.join(root, p), 'utf8');
const exists = (root: string, p: string) => fs.existsSync(path.join(root, p)) || isLink(path.join(root, p));
function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}
function listAll(root: string, rel = ''): string[] {
  const out: string[] = [];
  for (const n of fs.readdirSync(path.join(root, rel)).sort()) {
    const r = rel ? `${rel}/${n}` : n;
    out.push(r);
    if (fs.lstatSync(path.join(root, r)).isDirectory()) out.push(...listAll(root, r));
  }
  return out;
}

const OCI_LAYER: TarEntry[] = [
  { name: './', type: 'dir', mode: 0o700 }, // the root's own entry: ignored
  { name: 'etc/', type: 'dir', mode: 0o750, uid: 0, gid: 0, mtime: 1_600_000_000 },
  { name: 'etc/.wh.old.conf', body: '' },
  { name: 'etc/new.conf', body: 'new\n', mode: 0o640, uid: 1234, gid: 5678, mtime: 1_500_000_000 },
  // the opaque marker comes after an entry of its own directory: that entry must survive
  { name: 'etc/app/', type: 'dir', mode: 0o755 },
  { name: 'etc/app/c.conf', body: 'c\n' },
  { name: 'etc/app/.wh..wh..opq', body: '' },
  { name: 'srv/data/', type: 'dir', mode: 0o711 }, // directory over directory: kept, new mode
  { name: 'srv/was-dir', body: 'now a file\n' }, // file over directory
  { name: 'srv/was-file/', type: 'dir' }, // directory over file
  { name: 'srv/was-file/inner', body: 'inner\n' },
  { name: 'srv/was-link', body: 'replaced the link\n' }, // file over symlink: the link is replaced, its target untouched
  { name: 'srv/new-link', type: 'symlink', linkname: '/etc/new.conf' },
  { name: 'srv/hard', type: 'hardlink', linkname: 'etc/new.conf' },
  { name: 'srv/missing/.wh.nothing', body: '' }, // whiteout of something the lower tree does not have
  { name: 'opt/.wh.tool', body: '' },
  { name: 'opt/tool/', type: 'dir' }, // whited out lower, recreated by the same layer
  { name: 'opt/tool/fresh', body: 'fresh\n' },
  { name: 'srv/lib/app/', type: 'dir', mode: 0o555, mtime: 1_400_000_000 }, // mode without u+w, set last
  { name: 'srv/lib/app/state', body: 'state\n', mtime: 1_300_000_000 },
];

describe('tar layers with OCI semantics', () => {
  it('applies whiteouts, opaque directories, replacements, modes, owners, mtimes, links', async () => {
    t = await tempSysroot({ tree: BASE });
    const booted = hashTree(t.sysroot.treePath(t.sysroot.status().booted!));
    const r = await t.sysroot.stage(writeLayer(t, 'layer.tar', OCI_LAYER));
    const tree = r.path;

    // whiteouts and the opaque directory; markers never appear
    expect(exists(tree, 'etc/old.conf')).toBe(false);
    expect(fs.readdirSync(path.join(tree, 'etc/app')).sort()).toEqual(['c.conf']);
    expect(listAll(tree).filter((p) => p.includes('.wh.'))).toEqual([]);
    expect(exists(tree, 'srv/missing')).toBe(false);
    expect(fs.readdirSync(path.join(tree, 'opt/tool'))).toEqual(['fresh']);
    expect(read(tree, 'etc/hostname')).toBe('base\n');

    // replacements
    expect(st(tree, 'srv/data').isDirectory()).toBe(true);
    expect(st(tree, 'srv/data').mode & 0o7777).toBe(0o711);
    expect(read(tree, 'srv/data/keep')).toBe('keep\n');
    expect(read(tree, 'srv/was-dir')).toBe('now a file\n');
    expect(read(tree, 'srv/was-file/inner')).toBe('inner\n');
    expect(st(tree, 'srv/was-link').isFile()).toBe(true);
    expect(read(tree, 'srv/was-link')).toBe('replaced the link\n');
    expect(read(tree, 'srv/was-link-target')).toBe('target\n');

    // attributes
    const f = st(tree, 'etc/new.conf');
    expect(f.mode & 0o7777).toBe(0o640);
    expect(Math.round(f.mtimeMs / 1000)).toBe(1_500_000_000);
    if (process.getuid?.() === 0) expect([f.uid, f.gid]).toEqual([1234, 5678]);
    else console.warn('not root: ownership from the layer is not applied, not checked');
    expect(st(tree, 'etc').mode & 0o7777).toBe(0o750);
    expect(Math.round(st(tree, 'etc').mtimeMs / 1000)).toBe(1_600_000_000);
    expect(st(tree, 'srv/lib/app').mode & 0o7777).toBe(0o555);
    expect(Math.round(st(tree, 'srv/lib/app').mtimeMs / 1000)).toBe(1_400_000_000);
    expect(fs.readdirSync(path.join(tree, 'var'))).toEqual([]); // the shared /var's mount point
    expect(fs.statSync(tree).mode & 0o7777).not.toBe(0o700); // "./" did not touch the root

    // links
    expect(fs.readlinkSync(path.join(tree, 'srv/new-link'))).toBe('/etc/new.conf');
    expect(st(tree, 'srv/hard').ino).toBe(f.ino);

    // the manifest matches the tree; the booted tree is untouched
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    expect(hashTree(t.sysroot.treePath(t.sysroot.status().booted!))).toBe(booted);
  });

  it('gives the same tree for .tar and .tar.gz', async () => {
    t = await tempSysroot({ tree: BASE });
    // A newer stage supersedes the staged one: hash each tree while it exists.
    const a = hashTree((await t.sysroot.stage(writeLayer(t, 'layer.tar', OCI_LAYER))).path);
    const b = hashTree((await t.sysroot.stage(writeLayer(t, 'layer.tar.gz', OCI_LAYER, { gz: true }))).path);
    expect(b).toBe(a);
  });

  it('reads .tar.zst (Node zlib zstd where present, else the zstd tool)', async () => {
    t = await tempSysroot({ tree: BASE });
    const plain = writeLayer(t, 'layer.tar', OCI_LAYER);
    const zst = `${plain}.zst`;
    const tool = await execa('zstd', ['-q', '-f', plain, '-o', zst], { reject: false });
    if (tool.failed) {
      console.warn(`zstd tool unavailable (${tool.shortMessage}); only checking the error`);
      fs.writeFileSync(zst, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]));
      const err = await t.sysroot.stage(zst).catch((e: unknown) => e);
      expect(['TOOL_MISSING', 'SOURCE_CORRUPT']).toContain((err as StagedrootError).code);
      return;
    }
    expect(detectKind(zst)).toBe('tar');
    const a = hashTree((await t.sysroot.stage(plain)).path);
    const b = hashTree((await t.sysroot.stage(zst)).path);
    expect(b).toBe(a);
    // A corrupt zstd stream is a rejection naming the layer.
    const bad = path.join(t.scratch, 'bad.tar.zst');
    fs.writeFileSync(bad, Buffer.concat([fs.readFileSync(zst).subarray(0, 40), Buffer.alloc(40, 7)]));
    const err = (await t.sysroot.stage(bad).catch((e: unknown) => e)) as StagedrootError;
    expect(err.code).toBe('SOURCE_CORRUPT');
    expect(err.message).toContain('bad.tar.zst');
  });

  it('with replace, takes the archive as the whole new tree', async () => {
    t = await tempSysroot({ tree: BASE });
    const file = writeLayer(t, 'rootfs.tar', [
      { name: 'etc/', type: 'dir' },
      { name: 'etc/hostname', body: 'new\n' },
      { name: 'etc/.wh.ignored', body: '' },
      { name: 'usr/bin/sh', body: '#!\n', mode: 0o755 },
      { name: 'bin', type: 'symlink', linkname: 'usr/bin' },
    ]);
    const r = await t.sysroot.stage(sourceFromPath(file, { replace: true }));
    expect(listAll(r.path)).toEqual(['bin', 'etc', 'etc/hostname', 'usr', 'usr/bin', 'usr/bin/sh', 'var']); // var: the shared /var's empty mount point
    expect(read(r.path, 'etc/hostname')).toBe('new\n');
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    expect(read(t.sysroot.treePath(t.sysroot.status().booted!), 'etc/hostname')).toBe('base\n');
  });

  it('applies a whiteout and an entry of the same name, and an opaque root', async () => {
    t = await tempSysroot({ tree: BASE });
    const r = await t.sysroot.stage(writeLayer(t, 'l.tar', [{ name: 'etc/hostname', body: 'again\n' }, { name: 'etc/.wh.hostname', body: '' }, { name: 'srv/.wh.data', body: '' }]));
    expect(read(r.path, 'etc/hostname')).toBe('again\n');
    expect(exists(r.path, 'srv/data')).toBe(false);
    const o = await t.sysroot.stage(writeLayer(t, 'o.tar', [{ name: '.wh..wh..opq', body: '' }, { name: 'only', body: 'x' }]));
    expect(listAll(o.path)).toEqual(['only', 'var']); // var: the shared /var's empty mount point
  });

  it('checks the whole layer before writing: a late bad entry stops everything, all problems listed', async () => {
    t = await tempSysroot({ tree: BASE });
    const entries: TarEntry[] = [
      ...Array.from({ length: 50 }, (_, i) => ({ name: `srv/good/${i}`, body: `good ${i}\n` })),
      { name: '../evil', body: 'x' },
      { name: 'dev/null2', type: 'char', devmajor: 1, devminor: 3 },
      { name: 'l', type: 'symlink', linkname: '/etc' },
      { name: 'l/passwd', body: 'x' },
    ];
    const err = (await t.sysroot.stage(writeLayer(t, 'late.tar', entries)).catch((e: unknown) => e)) as StagedrootError;
    expect(err.code).toBe('PATH_ESCAPE');
    expect(err.path).toBe('../evil');
    expect(err.issues.map((i) => [i.code, i.path])).toEqual([
      ['PATH_ESCAPE', '../evil'],
      ['UNSAFE_ENTRY', 'dev/null2'],
      ['PATH_ESCAPE', 'l/passwd'],
    ]);
    expect(err.message).toContain('3 unsafe entries');
    // Nothing was built: no new tree anywhere in the sysroot.
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual([t.sysroot.status().booted]);
    expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
    expect(t.sysroot.status().lastFailure).toMatchObject({ code: 'PATH_ESCAPE', path: '../evil' });
  });

  it('streams file content bigger than a chunk intact', async () => {
    t = await tempSysroot({ tree: BASE });
    const big = randomBytes(3 * 1024 * 1024 + 123);
    const r = await t.sysroot.stage(writeLayer(t, 'big.tar.gz', [{ name: 'srv/blob', body: big }, { name: 'srv/after', body: 'after\n' }], { gz: true }));
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(sha(fs.readFileSync(path.join(r.path, 'srv/blob')))).toBe(sha(big));
    expect(read(r.path, 'srv/after')).toBe('after\n');
  });

  it('refuses an archive that changes between the check and the apply', async () => {
    t = await tempSysroot({ tree: BASE });
    const file = writeLayer(t, 'l.tar', [{ name: 'srv/a', body: 'a' }]);
    const cs = await tarLayerSource(file).plan(new ReadOnlyTree(t.sysroot.treePath('0001')));
    // Rewritten in place after the checks: pass 2 sees another file.
    fs.writeFileSync(file, tarArchive([{ name: '../../evil', body: 'x' }]));
    const scratchRoot = path.join(t.scratch, 'apply-root');
    fs.mkdirSync(scratchRoot);
    const root = new RootFs(scratchRoot);
    const err = await (async () => {
      for await (const op of cs.ops as AsyncIterable<ChangeOp>) await applyOp(root, op);
    })().catch((e: unknown) => e);
    expect((err as StagedrootError).code).toBe('SOURCE_CORRUPT');
    expect((err as StagedrootError).message).toContain('changed while it was being staged');
    expect(fs.readdirSync(scratchRoot)).toEqual([]);
  });

  it('plans lazily: the change set reads content only when an op is applied', async () => {
    t = await tempSysroot({ tree: BASE });
    const file = writeLayer(t, 'l.tar', [{ name: 'srv/a', body: 'aaa' }, { name: 'srv/b/', type: 'dir', mode: 0o700 }, { name: 'srv/b/c', type: 'symlink', linkname: '../a' }]);
    const cs = await tarLayerSource(file).plan(new ReadOnlyTree('/nonexistent'));
    expect(cs.description).toMatch(/3 entries, 3 bytes/);
    expect(cs.count).toBe(4); // three entries and one directory's final attributes
    const ops: string[] = [];
    for await (const op of cs.ops as AsyncIterable<ChangeOp>) ops.push(`${op.op} ${op.path}`);
    expect(ops).toEqual(['write srv/a', 'mkdir srv/b', 'symlink srv/b/c', 'setattr srv/b']);
  });

  it('reads what GNU tar (gnu and posix formats) and node-tar write', async () => {
    t = await tempSysroot({ tree: BASE });
    const deep = 'very-long-directory-name-'.repeat(5);
    const src = path.join(t.scratch, 'src');
    fs.mkdirSync(path.join(src, deep, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, deep, 'sub', `${'long-file-name-'.repeat(8)}.conf`), 'long\n');
    fs.writeFileSync(path.join(src, 'one'), 'shared\n');
    fs.linkSync(path.join(src, 'one'), path.join(src, 'two'));
    fs.symlinkSync(`${deep}/sub`, path.join(src, 'link-with-a-long-target'));
    fs.chmodSync(path.join(src, deep), 0o750);
    fs.mkdirSync(path.join(src, 'var')); // the staged tree has the shared /var's empty mount point
    const want = hashTree(src);
    const archives: string[] = [];
    for (const format of ['gnu', 'posix']) {
      const out = path.join(t.scratch, `gnu-${format}.tar`);
      const r = await execa('tar', [`--format=${format}`, '-C', src, '-cf', out, '.'], { reject: false });
      if (r.failed) console.warn(`GNU tar unavailable (${r.shortMessage}): ${format} format not checked`);
      else archives.push(out);
    }
    const { create } = await import('tar');
    const nodeTar = path.join(t.scratch, 'node-tar.tar.gz');
    await create({ gzip: true, cwd: src, file: nodeTar, portable: false }, fs.readdirSync(src));
    archives.push(nodeTar);
    for (const a of archives) {
      const r = await t.sysroot.stage(tarLayerSource(a, { replace: true }));
      expect(hashTree(r.path), a).toBe(want);
    }
  });

  it('is detected from content and wired into sourceFromPath', async () => {
    t = await tempSysroot({ tree: BASE });
    const plain = writeLayer(t, 'no-extension', [{ name: 'srv/x', body: 'x' }]);
    const gz = writeLayer(t, 'also-no-extension', [{ name: 'srv/x', body: 'x' }], { gz: true });
    expect(detectKind(plain)).toBe('tar');
    expect(detectKind(gz)).toBe('tar');
    expect(sourceFromPath(plain).kind).toBe('tar');
    const spec = path.join(t.scratch, 'spec.json');
    fs.writeFileSync(spec, JSON.stringify({ files: [] }));
    expect(() => sourceFromPath(spec, { replace: true })).toThrow(/--replace applies to tar and directory sources/);
    const xz = path.join(t.scratch, 'layer.tar.xz');
    fs.writeFileSync(xz, Buffer.concat([Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), Buffer.alloc(600)]));
    const err = (await t.sysroot.stage(tarLayerSource(xz)).catch((e: unknown) => e)) as StagedrootError;
    expect(err.code).toBe('SOURCE_UNSUPPORTED');
    expect(err.message).toContain('xz');
  });
});
