import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import type { StageResult } from '../../src/stage/stage.js';
import { countingHook, reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { describeTree, freshApply, makeTar, writeLayout, type GenEntry } from '../layer-store/helpers.js';

/**
 * A stage of an OCI image goes through the sysroot's layer store (SYSROOT/layers): each
 * layer is imported once, a layer the store has is never read again, and the tree is
 * linked from the store (usr/ hardlinked to its objects, the rest copied), equal to the
 * fresh apply of the image.
 */
let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const base: GenEntry[] = [
  { type: 'dir', path: 'usr', mode: 0o755 },
  { type: 'dir', path: 'usr/lib', mode: 0o755 },
  { type: 'file', path: 'usr/lib/a.so', content: 'library a\n', mode: 0o755, mtime: 1_600_000_000 },
  { type: 'file', path: 'usr/lib/old', content: 'removed by a later layer\n' },
  { type: 'dir', path: 'etc', mode: 0o755 },
  { type: 'file', path: 'etc/os-release', content: 'ID=store\nVERSION_ID=1\n' },
  { type: 'hardlink', path: 'usr/lib/a-link.so', target: 'usr/lib/a.so' },
];
const top: GenEntry[] = [
  { type: 'dir', path: 'usr/bin', mode: 0o755 },
  { type: 'file', path: 'usr/bin/tool', content: '#!/bin/sh\necho two\n', mode: 0o755 },
  { type: 'file', path: 'usr/lib/.wh.old', content: '' },
  { type: 'file', path: 'etc/os-release', content: 'ID=store\nVERSION_ID=2\n' },
];

/** Everything but the shared var/ (diverted, an empty mount point in the tree) and the sysroot mount point. */
const ofImage = (lines: string[]): string[] => lines.filter((l) => /^(757372|657463)/.test(l)); // usr, etc (hex names)

/** `t` booted into v1 (base, top), and v2: the same bottom layer, its top layer changed, with v2's fresh apply. */
async function bootedOnImage(t: TempSysroot): Promise<{ r1: StageResult; v2: string; reference: string }> {
  const v1 = path.join(t.scratch, 'v1');
  writeLayout(v1, [{ tar: makeTar(base), gzip: true }, { tar: makeTar(top), gzip: true }]);
  const r1 = await t.sysroot.stage(v1);
  await reboot(t.sysroot);
  expect(t.sysroot.status().booted).toBe(r1.id);
  const changed: GenEntry[] = [...top.filter((e) => e.path !== 'usr/bin/tool'), { type: 'file', path: 'usr/bin/tool', content: '#!/bin/sh\necho three\n', mode: 0o755 }];
  const v2 = path.join(t.scratch, 'v2');
  writeLayout(v2, [{ tar: makeTar(base), gzip: true }, { tar: makeTar(changed), gzip: true }]);
  const reference = path.join(t.scratch, 'fresh-v2');
  await freshApply(v2, reference);
  return { r1, v2, reference };
}

/**
 * Stages `img`, with what the copy step reported: an early copy is taken whole, reported
 * once (its count) when the step starts; a copy made in the step reports as it goes (its
 * first entry first).
 */
async function stageCopying(s: Sysroot, img: string): Promise<{ copied: number[]; r: StageResult }> {
  const copied: number[] = [];
  const r = await s.stage(img, { onProgress: (p) => void (p.phase === 'copy' && p.done > 0 ? copied.push(p.done) : undefined) });
  return { copied, r };
}

describe('stage of an OCI image through the layer store', () => {
  it('imports each layer once, links usr/ from the store, and never reads a stored layer again', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const v1 = path.join(t.scratch, 'v1');
    const [a] = writeLayout(v1, [{ tar: makeTar(base), gzip: true }]);
    const r1 = await t.sysroot.stage(v1);
    const st1 = t.sysroot.status();
    expect(st1.deployments.find((d) => d.id === r1.id)!.origin?.layers).toEqual([a!.diffId]);
    // usr/ shares the store's inodes; etc/ is a copy of its own.
    const objects = path.join(t.dir, 'layers', 'objects');
    const inodes = new Set<number>();
    for (const kk of fs.readdirSync(objects)) for (const o of fs.readdirSync(path.join(objects, kk))) inodes.add(fs.statSync(path.join(objects, kk, o)).ino);
    expect(inodes.has(fs.statSync(path.join(r1.path, 'usr/lib/a.so')).ino)).toBe(true);
    expect(fs.statSync(path.join(r1.path, 'usr/lib/a-link.so')).ino).toBe(fs.statSync(path.join(r1.path, 'usr/lib/a.so')).ino);
    expect(inodes.has(fs.statSync(path.join(r1.path, 'etc/os-release')).ino)).toBe(false);

    // v2 = v1's layer + a small one on top. Its copy of v1's layer is garbage of the same size:
    // the stage must take that layer from the store (reading it would fail its digest).
    const v2 = path.join(t.scratch, 'v2');
    const [a2, b] = writeLayout(v2, [{ tar: makeTar(base), gzip: true }, { tar: makeTar(top), gzip: true }]);
    expect(a2!.digest).toBe(a!.digest);
    const reference = path.join(t.scratch, 'fresh');
    await freshApply(v2, reference);
    fs.writeFileSync(a2!.file, Buffer.alloc(a2!.size, 0x5a));
    const r2 = await t.sysroot.stage(v2);
    expect(t.sysroot.status().deployments.find((d) => d.id === r2.id)!.origin?.layers).toEqual([a!.diffId, b!.diffId]);
    expect(ofImage(describeTree(r2.path))).toEqual(ofImage(describeTree(reference)));
    expect(fs.existsSync(path.join(r2.path, 'usr/lib/old'))).toBe(false);
    expect(fs.readFileSync(path.join(r2.path, 'etc/os-release'), 'utf8')).toBe('ID=store\nVERSION_ID=2\n');
    // The unchanged file of the lower layer is the store's inode still: stored once, for every image.
    expect(inodes.has(fs.statSync(path.join(r2.path, 'usr/lib/a.so')).ino)).toBe(true);
  });

  it('a base whose top-level name is not UTF-8: the image stage says that name went, byte for byte (escaped), not a lossy decoding', async () => {
    const src = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-image-latin1-'));
    try {
      fs.writeFileSync(path.join(src, 'etc-hostname'), 'node\n');
      fs.writeFileSync(Buffer.concat([Buffer.from(`${src}/`), Buffer.from('caf\xe9', 'latin1')]), 'x\n');
      t = await tempSysroot({ fromDirectory: src });
    } finally {
      fs.rmSync(src, { recursive: true, force: true });
    }
    const v1 = path.join(t.scratch, 'v1');
    writeLayout(v1, [{ tar: makeTar(base), gzip: true }]);
    const r = await t.sysroot.stage(v1);
    expect(r.delta).toContain('caf\udce9');
    expect(r.delta.filter((p) => p.includes('\ufffd'))).toEqual([]);
    expect(fs.readdirSync(r.path, { encoding: 'buffer' }).some((n) => n.equals(Buffer.from('caf\xe9', 'latin1')))).toBe(false);
  });

  it('a layer that fails its checks imports nothing: the stage is rejected and the store keeps no part of it', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const bad = path.join(t.scratch, 'bad');
    writeLayout(bad, [{ tar: makeTar(base) }, { tar: makeTar([{ type: 'file', path: '../escape', content: 'x' }]) }]);
    await expect(t.sysroot.stage(bad)).rejects.toMatchObject({ code: 'PATH_ESCAPE' });
    const diff = path.join(t.dir, 'layers', 'diff', 'sha256');
    // The first layer passed and stays (a later image may use it); the hostile one is nowhere.
    expect(fs.readdirSync(diff)).toHaveLength(1);
    expect(fs.readdirSync(path.join(t.dir, 'layers', 'tmp'))).toEqual([]);
    expect(t.sysroot.status().staged).toBeNull();
  });

  it("the layers a stage imports are committed after the tree's sync: until then under tmp/ (a crash leaves them to recovery's sweep), committed whole even when the stage is rejected", async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const layers = path.join(t.dir, 'layers');
    const v1 = path.join(t.scratch, 'v1');
    const [a, b] = writeLayout(v1, [{ tar: makeTar(base), gzip: true }, { tar: makeTar(top), gzip: true }]);
    const seen: { diff: string[]; tmp: number }[] = [];
    const look = (): void => void seen.push({ diff: fs.existsSync(path.join(layers, 'diff', 'sha256')) ? fs.readdirSync(path.join(layers, 'diff', 'sha256')) : [], tmp: fs.readdirSync(path.join(layers, 'tmp')).length });
    // Validate runs once the tree is built from the layers, before the sync step.
    await expect(t.sysroot.stage(v1, { validators: [() => (look(), [{ code: 'NO', path: 'etc', message: 'rejected', severity: 'error' as const }])] })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(seen).toEqual([{ diff: [], tmp: 2 }]);
    // Rejected: the layers were made durable and committed all the same, each with its blob's link.
    expect(fs.readdirSync(path.join(layers, 'diff', 'sha256')).sort()).toEqual([a!.diffId, b!.diffId].map((d) => d.slice(7)).sort());
    expect(fs.readdirSync(path.join(layers, 'tmp'))).toEqual([]);
    for (const l of [a!, b!]) expect(fs.readlinkSync(path.join(layers, 'blob', 'sha256', l.digest.slice(7)))).toBe(`../../diff/sha256/${l.diffId.slice(7)}`);
    const record = JSON.parse(fs.readFileSync(path.join(layers, 'diff', 'sha256', a!.diffId.slice(7), 'layer.json'), 'utf8')) as { digests: string[] };
    expect(record.digests).toEqual([a!.digest]);

    // Staged again: nothing imported (the layers are whole in the store), committed as before.
    const r = await t.sysroot.stage(v1, { validators: [() => (look(), [])] });
    expect(seen[1]).toEqual({ diff: seen[1]!.diff, tmp: 0 });
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
  });

  it('an update over an image deployment of the same bottom layer copies its usr/ while the plan runs: taken when the tree is built on it, else gone', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const { r1, v2, reference } = await bootedOnImage(t);
    const stage = (img: string) => stageCopying(t!.sysroot, img);
    const work = path.join(t.dir, 'work');

    // The top layer changed: the tree is v1's usr/ (copied early), changed where v2's differs.
    const s2 = await stage(v2);
    expect(s2.copied).toHaveLength(1);
    expect(s2.copied[0]).toBeGreaterThan(1);
    expect(ofImage(describeTree(s2.r.path))).toEqual(ofImage(describeTree(reference)));
    expect(fs.statSync(path.join(s2.r.path, 'usr/lib/a.so')).ino).toBe(fs.statSync(path.join(r1.path, 'usr/lib/a.so')).ino);
    expect((await t.sysroot.verify(s2.r.id)).drift).toEqual([]);
    await t.sysroot.discardStaged();

    // The same bottom, but the image carries an SELinux policy: the stage labels what it writes, links nothing,
    // so the early copy (links to v1's inodes) is not taken; its tree is gone before the tree is built whole.
    const labelled: GenEntry[] = [...top, { type: 'dir', path: 'etc/selinux', mode: 0o755 }, { type: 'file', path: 'etc/selinux/config', content: 'SELINUX=disabled\n' }];
    const v3 = path.join(t.scratch, 'v3');
    writeLayout(v3, [{ tar: makeTar(base), gzip: true }, { tar: makeTar(labelled), gzip: true }]);
    const s3 = await stage(v3);
    expect(s3.copied).toEqual([]);
    expect(fs.statSync(path.join(s3.r.path, 'usr/lib/a.so')).ino).not.toBe(fs.statSync(path.join(r1.path, 'usr/lib/a.so')).ino);
    expect(fs.readFileSync(path.join(s3.r.path, 'usr/bin/tool'), 'utf8')).toBe('#!/bin/sh\necho two\n');
    expect((await t.sysroot.verify(s3.r.id)).drift).toEqual([]);
    await t.sysroot.discardStaged();

    // A plan that fails after the early copy started (the new layer is hostile): nothing of it stays in work/.
    const v4 = path.join(t.scratch, 'v4');
    writeLayout(v4, [{ tar: makeTar(base), gzip: true }, { tar: makeTar([{ type: 'file', path: '../escape', content: 'x' }]) }]);
    await expect(t.sysroot.stage(v4)).rejects.toMatchObject({ code: 'PATH_ESCAPE' });
    expect(fs.existsSync(work) ? fs.readdirSync(work) : []).toEqual([]);
    expect(t.sysroot.status().staged).toBeNull();
  });

  it("a rejected stage whose layers' commit fails still reports its own failure, records it and removes its work tree", async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const v1 = path.join(t.scratch, 'v1');
    writeLayout(v1, [{ tar: makeTar(base), gzip: true }, { tar: makeTar(top), gzip: true }]);
    const diff = `${path.join(t.dir, 'layers', 'diff')}/`;
    // An I/O error at the first layer's rename into diff/ (the commit that follows the rejection).
    const failing = { afterMutation: (op: string, p: string) => { if (op === 'rename' && p.includes(diff)) throw Object.assign(new Error(`EIO: injected at ${p}`), { code: 'EIO' }); } };
    const s = await Sysroot.open(t.dir, { faults: failing });
    const reject = () => [{ code: 'NO', path: 'etc', message: 'rejected', severity: 'error' as const }];
    await expect(s.stage(v1, { validators: [reject] })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(s.status().lastFailure).toMatchObject({ code: 'VALIDATION_FAILED', step: 'validate' });
    expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
    // What the failed commit left is taken up again: the next stage imports what is missing and builds the same tree.
    const r = await t.sysroot.stage(v1);
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
  });

  it('with a fault hook the early copy runs whole before the plan: its writes counted first, in one order, and the copy taken', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const { r1, v2, reference } = await bootedOnImage(t);
    const hook = countingHook();
    const s = await Sysroot.open(t.dir, { faults: hook });
    const { copied, r } = await stageCopying(s, v2);
    const work = path.join(t.dir, 'work', r.id, 'tree');
    const firstImport = hook.ops.findIndex((o) => o.includes(`${path.join(t!.dir, 'layers')}/`));
    expect(firstImport).toBeGreaterThan(0);
    // The early copy's writes (v1's usr/ linked into the new tree) were counted, all before the import of v2's top layer.
    const early = hook.ops.slice(0, firstImport).filter((o) => o.includes(`${work}/`)).map((o) => o.replace(work, 'tree'));
    expect(early.filter((o) => o.startsWith('link ')).sort()).toEqual(['link tree/usr/bin/tool', 'link tree/usr/lib/a-link.so', 'link tree/usr/lib/a.so']);
    // And taken: the copy step reported once, whole; the tree the fresh apply's, linked to v1's inodes.
    expect(copied).toHaveLength(1);
    expect(ofImage(describeTree(r.path))).toEqual(ofImage(describeTree(reference)));
    expect(fs.statSync(path.join(r.path, 'usr/lib/a.so')).ino).toBe(fs.statSync(path.join(r1.path, 'usr/lib/a.so')).ino);
    expect((await s.verify(r.id)).drift).toEqual([]);
  });
});
