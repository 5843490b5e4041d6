import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { importLayer } from '../../src/layer-store/import-layer.js';
import { linkLayers, linkLayersNow } from '../../src/layer-store/link-tree.js';
import { releaseLayers } from '../../src/layer-store/release.js';
import { LayerStore } from '../../src/layer-store/store.js';
import { hashTree } from '../../src/testing/index.js';
import { blobOf, describeTree, expectSameLinks, freshApply, makeTar, scratch, writeLayout, type GenEntry } from './helpers.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
function tmp(onDisk = false): string {
  const d = scratch('layer-store-', onDisk);
  dirs.push(d);
  return d;
}

const NAIVE = Buffer.from([0x6e, 0x61, 0xef, 0x76, 0x65]); // latin-1 "naïve": not UTF-8
const LABEL = Buffer.from('system_u:object_r:bin_t:s0');

/** Three layers: a base, a middle one with whiteouts, an opaque dir and a file↔dir swap, a small top. */
function stack(): GenEntry[][] {
  const base: GenEntry[] = [
    { type: 'dir', path: 'usr', mode: 0o755 },
    { type: 'dir', path: 'usr/bin', mode: 0o755 },
    { type: 'file', path: 'usr/bin/tool', content: '#!/bin/sh\necho tool\n', mode: 0o755, xattrs: [['security.selinux', LABEL]] },
    { type: 'file', path: 'usr/bin/suid', content: 'suid\n', mode: 0o4755, uid: 0, gid: 0 },
    { type: 'hardlink', path: 'usr/bin/tool-alias', target: 'usr/bin/tool' },
    { type: 'dir', path: 'usr/lib', mode: 0o555 },
    { type: 'file', path: 'usr/lib/libx.so', content: 'lib v1\n' },
    { type: 'file', path: 'usr/lib/same', content: 'same bytes\n', mtime: 1_600_000_000 },
    { type: 'file', path: Buffer.concat([Buffer.from('usr/lib/'), NAIVE]), content: 'latin-1\n', xattrs: [['user.blob', Buffer.from([0, 10, 10, 0xff])]] },
    { type: 'dir', path: 'etc', mode: 0o755 },
    { type: 'file', path: 'etc/motd', content: 'welcome\n', uid: 1000, gid: 1000 },
    { type: 'file', path: 'etc/shadow', content: 'root:*:\n', mode: 0o600 },
    { type: 'dir', path: 'etc/app' },
    { type: 'file', path: 'etc/app/a.conf', content: 'a\n' },
    { type: 'file', path: 'etc/app/b.conf', content: 'b\n' },
    { type: 'symlink', path: 'etc/localtime', target: '/usr/share/zoneinfo/UTC' },
    { type: 'file', path: 'opt', content: 'a file, later a directory\n' },
    { type: 'dir', path: 'srv' },
    { type: 'file', path: 'srv/data', content: 'data\n' },
  ];
  const middle: GenEntry[] = [
    { type: 'file', path: 'usr/lib/.wh.libx.so', content: '' },
    { type: 'dir', path: 'etc/app' },
    { type: 'file', path: 'etc/app/.wh..wh..opq', content: '' },
    { type: 'file', path: 'etc/app/c.conf', content: 'c\n' },
    { type: 'dir', path: 'opt' },
    { type: 'file', path: 'opt/now-a-dir', content: 'inside\n' },
    { type: 'file', path: 'srv', content: 'a directory, now a file\n' },
    { type: 'file', path: 'usr/lib/same2', content: 'same bytes\n', mtime: 1_600_000_000 },
    { type: 'file', path: 'usr/bin/tool', content: '#!/bin/sh\necho tool v2\n', mode: 0o755 },
  ];
  const top: GenEntry[] = [
    { type: 'file', path: 'etc/.wh.shadow', content: '' },
    { type: 'file', path: 'etc/motd', content: 'welcome v3\n' },
    { type: 'dir', path: 'usr/lib', mode: 0o755, xattrs: [['user.dir', Buffer.from('d')]] },
  ];
  return [base, middle, top];
}

async function buildBoth(layers: GenEntry[][], gzip = true, onDisk = false) {
  const d = tmp(onDisk);
  const written = writeLayout(path.join(d, 'img'), layers.map((l) => ({ tar: makeTar(l), gzip })));
  await freshApply(path.join(d, 'img'), path.join(d, 'fresh'));
  const store = new LayerStore(path.join(d, 'layers'));
  for (const w of written) await importLayer(store, blobOf(w));
  fs.mkdirSync(path.join(d, 'linked'));
  const res = linkLayersNow({ store: store.dir, tree: path.join(d, 'linked'), diffIds: written.map((w) => w.diffId), hardlinkPrefixes: ['usr'] });
  return { d, written, store, res, fresh: path.join(d, 'fresh'), linked: path.join(d, 'linked') };
}

describe('the layer store', () => {
  it('a tree linked from the store is the fresh apply of the same layers: names, bytes, modes, owners, xattrs, file mtimes', async () => {
    const b = await buildBoth(stack());
    expect(describeTree(b.linked)).toEqual(describeTree(b.fresh));
    expect(hashTree(b.linked)).toBe(hashTree(b.fresh));
    // What the middle and top layers did, as a check that the reference is what OCI says.
    expect(fs.existsSync(path.join(b.fresh, 'usr/lib/libx.so'))).toBe(false);
    expect(fs.readdirSync(path.join(b.fresh, 'etc/app'))).toEqual(['c.conf']);
    expect(fs.statSync(path.join(b.fresh, 'opt')).isDirectory()).toBe(true);
    expect(fs.statSync(path.join(b.fresh, 'srv')).isFile()).toBe(true);
    expect(fs.existsSync(path.join(b.fresh, 'etc/shadow'))).toBe(false);
    // usr/bin/tool was replaced above its hardlink: the alias keeps the old bytes, alone, in both.
    for (const t of [b.fresh, b.linked]) expect(fs.readFileSync(path.join(t, 'usr/bin/tool-alias'), 'utf8')).toBe('#!/bin/sh\necho tool\n');
    expectSameLinks(b.fresh, b.linked);
  });

  it('usr/ is hardlinked to the store objects, the rest is copied (a private inode)', async () => {
    const b = await buildBoth(stack());
    const obj = (rel: string): fs.Stats => fs.statSync(path.join(b.linked, rel));
    expect(obj('usr/lib/same').nlink).toBeGreaterThan(1);
    expect(obj('etc/motd').nlink).toBe(1);
    expect(b.res.linked).toBeGreaterThan(0);
    expect(b.res.copied).toBeGreaterThan(0);
    // usr/lib/same and usr/lib/same2 (two layers, same bytes and attributes) are one object.
    expect(obj('usr/lib/same').ino).toBe(obj('usr/lib/same2').ino);
    expect(b.res.explicitLabels).toEqual(['usr/bin/tool']); // as RootFs records it for a fresh write
  });

  it('each file is stored once: a layer whose files the store has adds no object; an image stored again reads no blob', async () => {
    const d = tmp();
    const a = writeLayout(path.join(d, 'a'), [{ tar: makeTar(stack()[0]!), gzip: true }]);
    const same = writeLayout(path.join(d, 'b'), [{ tar: makeTar(stack()[0]!), gzip: false }]);
    const store = new LayerStore(path.join(d, 'layers'));
    const first = await importLayer(store, blobOf(a[0]!));
    expect(first.imported).toBe(true);
    expect(first.layer.record.files).toBe(11); // usr/bin/tool-alias is a hardlink, not a file of its own
    expect(first.layer.record.newObjects).toBe(11);
    // The same tar uncompressed: another digest, the same diff_id; found by diff_id, the blob never opened.
    const again = await importLayer(store, { ...blobOf(same[0]!), open: () => { throw new Error('read the blob again'); } });
    expect(again.imported).toBe(false);
    expect(again.layer.record.digests.sort()).toEqual([a[0]!.digest, same[0]!.digest].sort());
    // By the compressed digest alone (a registry blob before its config is read).
    expect(store.find({ digest: same[0]!.digest })?.record.diffId).toBe(a[0]!.diffId);
    // A second layer holding the same files with other names: no new object.
    const copy = (p: Buffer | string): Buffer => Buffer.concat([Buffer.from(p), Buffer.from('.copy')]);
    const renamed = stack()[0]!.map((e) => (e.type === 'file' ? { ...e, path: copy(e.path) } : e.type === 'hardlink' ? { ...e, target: copy(e.target) } : e));
    const c = writeLayout(path.join(d, 'c'), [{ tar: makeTar(renamed), gzip: true }]);
    const second = await importLayer(store, blobOf(c[0]!, { withDiffId: false }));
    expect(second.imported).toBe(true);
    expect(second.layer.record.diffId).toBe(c[0]!.diffId);
    expect(second.layer.record.newObjects).toBe(0);
  });

  it('a blob that does not match its digest or diff_id is rejected and leaves nothing in the store', async () => {
    const d = tmp();
    const [w] = writeLayout(path.join(d, 'img'), [{ tar: makeTar(stack()[0]!), gzip: true }]);
    const store = new LayerStore(path.join(d, 'layers'));
    const badDigest = `sha256:${'0'.repeat(64)}`;
    await expect(importLayer(store, { ...blobOf(w!), digest: badDigest })).rejects.toMatchObject({ code: 'SOURCE_CORRUPT', digest: badDigest, message: expect.stringContaining('does not match its digest') });
    await expect(importLayer(store, { ...blobOf(w!), diffId: badDigest })).rejects.toMatchObject({ code: 'SOURCE_CORRUPT', digest: badDigest, message: expect.stringContaining('(its diff_id, of the uncompressed tar)') });
    expect(fs.readdirSync(store.tmpDir)).toEqual([]);
    expect(store.layers()).toEqual([]);
    for (const kk of fs.readdirSync(store.objectsDir)) expect(fs.readdirSync(path.join(store.objectsDir, kk))).toEqual([]);
  });

  it('an unsafe entry rejects the whole layer as the hostile-archive checks do, and nothing of it stays', async () => {
    const d = tmp();
    const hostile: GenEntry[] = [
      { type: 'file', path: 'usr/ok', content: 'fine\n' },
      { type: 'symlink', path: 'usr/escape', target: '/etc' },
      { type: 'file', path: 'usr/escape/passwd', content: 'through the link\n' },
    ];
    const [w] = writeLayout(path.join(d, 'img'), [{ tar: makeTar(hostile), gzip: false }]);
    const store = new LayerStore(path.join(d, 'layers'));
    const err = await importLayer(store, blobOf(w!)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StagedrootError);
    expect(err).toMatchObject({ code: 'PATH_ESCAPE', path: 'usr/escape/passwd' });
    expect(fs.readdirSync(store.tmpDir)).toEqual([]);
    expect(store.layers()).toEqual([]);
    for (const kk of fs.readdirSync(store.objectsDir)) expect(fs.readdirSync(path.join(store.objectsDir, kk))).toEqual([]);
  });

  it('an import that died part-way is never trusted: its temp directory is removed by the next import', async () => {
    const d = tmp();
    const [w] = writeLayout(path.join(d, 'img'), [{ tar: makeTar(stack()[0]!), gzip: true }]);
    const store = new LayerStore(path.join(d, 'layers'));
    store.prepare();
    const left = path.join(store.tmpDir, '.stagedroot-tmp-1-abcdef');
    fs.mkdirSync(path.join(left, 'o'), { recursive: true });
    fs.writeFileSync(path.join(left, 'layer.json'), '{"half": true}');
    expect(store.find({ diffId: w!.diffId })).toBeNull();
    await importLayer(store, blobOf(w!));
    expect(fs.existsSync(left)).toBe(false);
    expect(store.find({ diffId: w!.diffId })?.record.files).toBeGreaterThan(0);
  });

  it('objects an import cut short left under their keys (empty, or never written back) are removed before the next import looks for them', async () => {
    const d = tmp();
    const [w] = writeLayout(path.join(d, 'img'), [{ tar: makeTar(stack()[0]!), gzip: true }]);
    // The objects the layer has, as a whole import writes them.
    const good = new LayerStore(path.join(d, 'good'));
    await importLayer(good, blobOf(w!));
    const objects = fs.readdirSync(good.objectsDir).flatMap((kk) => fs.readdirSync(path.join(good.objectsDir, kk)).map((r) => path.join(kk, r)));
    expect(objects.length).toBeGreaterThan(2);
    // A store where an import of that layer died after creating each object: every one is
    // there under its key, cut short (empty), and its directory is left under tmp/.
    const store = new LayerStore(path.join(d, 'layers'));
    store.prepare();
    fs.mkdirSync(path.join(store.tmpDir, '.stagedroot-tmp-1-abcdef'));
    for (const o of objects) {
      fs.mkdirSync(path.dirname(path.join(store.objectsDir, o)), { recursive: true });
      fs.writeFileSync(path.join(store.objectsDir, o), '');
    }
    const r = await importLayer(store, blobOf(w!));
    expect(r.imported).toBe(true);
    expect(r.layer.record.newObjects).toBe(objects.length);
    for (const o of objects) expect(fs.readFileSync(path.join(store.objectsDir, o)), o).toEqual(fs.readFileSync(path.join(good.objectsDir, o)));
    expect(fs.readdirSync(store.tmpDir)).toEqual([]);
  });

  it('the link runs as a tree task, and a layer missing from the store is an error naming it', async () => {
    const b = await buildBoth(stack().slice(0, 1));
    const again = path.join(b.d, 'again');
    fs.mkdirSync(again);
    await linkLayers({ store: b.store.dir, tree: again, diffIds: [b.written[0]!.diffId], hardlinkPrefixes: ['usr'] });
    expect(describeTree(again)).toEqual(describeTree(b.linked));
    const missing = `sha256:${'1'.repeat(64)}`;
    await expect(linkLayers({ store: b.store.dir, tree: again, diffIds: [missing], hardlinkPrefixes: ['usr'] })).rejects.toMatchObject({ code: 'STATE_CORRUPT', message: expect.stringContaining(missing) });
  });

  it('on the root filesystem (ext4 here), uncompressed layers', async () => {
    const b = await buildBoth(stack(), false, true);
    expect(describeTree(b.linked)).toEqual(describeTree(b.fresh));
  });

  it('releasing the layers no deployment uses: their directories, links and objects go; the kept layers and trees linked before stay whole', async () => {
    const d = tmp();
    const [l0, l1, l2] = stack();
    const a = writeLayout(path.join(d, 'a'), [{ tar: makeTar(l0!), gzip: true }, { tar: makeTar(l1!), gzip: true }]);
    const b = writeLayout(path.join(d, 'b'), [{ tar: makeTar(l0!), gzip: true }, { tar: makeTar(l2!), gzip: true }]);
    await freshApply(path.join(d, 'b'), path.join(d, 'fresh-b'));
    const store = new LayerStore(path.join(d, 'layers'));
    for (const w of [...a, ...b]) await importLayer(store, blobOf(w));
    const treeA = path.join(d, 'tree-a');
    fs.mkdirSync(treeA);
    linkLayersNow({ store: store.dir, tree: treeA, diffIds: a.map((w) => w.diffId), hardlinkPrefixes: ['usr'] });
    const beforeA = describeTree(treeA);
    const objects = (): number => fs.readdirSync(store.objectsDir).reduce((n, kk) => n + fs.readdirSync(path.join(store.objectsDir, kk)).length, 0);
    const before = objects();
    // Deployment A pruned: only B's layers are kept.
    const r = releaseLayers(store, b.map((w) => w.diffId));
    expect(r.layers).toEqual([a[1]!.diffId]);
    expect(r.objects).toBeGreaterThan(0);
    expect(objects()).toBe(before - r.objects);
    expect(store.find({ diffId: a[1]!.diffId })).toBeNull();
    expect(store.find({ digest: a[1]!.digest })).toBeNull();
    expect(fs.readdirSync(store.tmpDir)).toEqual([]);
    expect(describeTree(treeA)).toEqual(beforeA); // its inodes outlive the store's names
    const treeB = path.join(d, 'tree-b');
    fs.mkdirSync(treeB);
    linkLayersNow({ store: store.dir, tree: treeB, diffIds: b.map((w) => w.diffId), hardlinkPrefixes: ['usr'] });
    expect(describeTree(treeB)).toEqual(describeTree(path.join(d, 'fresh-b')));
    // Nothing kept: the store is empty again.
    expect(releaseLayers(store, []).layers.sort()).toEqual(b.map((w) => w.diffId).sort());
    expect(objects()).toBe(0);
    expect(store.layers()).toEqual([]);
  });
});
