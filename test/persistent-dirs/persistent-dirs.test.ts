/**
 * Shared directories (DESIGN.md invariant 7): /var lives once in the sysroot, outside
 * every deployment; stage never writes it; spec/Ignition entries under it are applied at
 * finalize (previous versions kept aside), layer entries only where nothing is; rollback,
 * mark-bad, fallback and prune never touch it; a sysroot from before is upgraded by open.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import { tarLayerSource } from '../../src/sources/tar/layer-source.js';
import { hashTree, reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { tarArchive } from '../../fixtures/tar-writer.mjs';
import { BASE_TREE } from '../helpers/trees.js';

const TREE = { ...BASE_TREE, 'var/lib/db/data': 'row1\n', 'var/log/app.log': 'boot\n', 'var/cache/x': 'c\n' };
const read = (p: string): string => fs.readFileSync(p, 'utf8');

describe('shared directories', () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());

  it('init moves the source tree\'s var/ into the shared /var (the source unchanged); every tree has an empty mount point', async () => {
    t = await tempSysroot({ tree: TREE });
    const src = path.join(t.scratch, 'initial-tree');
    const st = t.sysroot.status();
    expect(st.shared).toEqual({ var: path.join(t.dir, 'shared', 'var') });
    expect(read(path.join(st.shared.var!, 'lib/db/data'))).toBe('row1\n');
    expect(read(path.join(src, 'var/lib/db/data'))).toBe('row1\n');
    expect(fs.readdirSync(path.join(t.sysroot.treePath('0001'), 'var'))).toEqual([]);
    expect(read(path.join(t.dir, 'shared.list'))).toBe('var\n');
    expect((await t.sysroot.verify()).drift).toEqual([]);
    const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    expect(fs.readdirSync(path.join(r.path, 'var'))).toEqual([]);
  });

  it('more shared directories with --shared; bad ones are usage errors', async () => {
    t = await tempSysroot({ tree: { ...TREE, 'srv/data/a': 'a\n' }, shared: ['var', '/srv/data/'] });
    const st = t.sysroot.status();
    expect(Object.keys(st.shared)).toEqual(['var', 'srv/data']);
    expect(read(path.join(st.shared['srv/data']!, 'a'))).toBe('a\n');
    expect(read(path.join(t.dir, 'shared.list'))).toBe('var\nsrv/data\n');
    for (const bad of [['../x'], ['usr'], ['etc'], ['var', 'var/lib']]) {
      await expect(Sysroot.init(path.join(t.scratch, `bad-${bad.join('-').replace(/\W/g, '')}`), { shared: bad })).rejects.toMatchObject({ code: 'USAGE', option: 'shared' });
    }
  });

  it('a /var write made after stage survives finalize and boot; stage never writes the shared /var', async () => {
    t = await tempSysroot({ tree: TREE });
    const shared = t.sysroot.status().shared.var!;
    const before = hashTree(shared);
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    expect(hashTree(shared)).toBe(before);
    fs.appendFileSync(path.join(shared, 'lib/db/data'), 'row2\n');
    await reboot(t.sysroot);
    expect(t.sysroot.status().booted).toBe('0002');
    expect(read(path.join(t.sysroot.status().shared.var!, 'lib/db/data'))).toBe('row1\nrow2\n');
  });

  it('rollback, mark-bad, automatic fallback and prune leave the shared /var alone', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const shared = s.status().shared.var!;
    const write = (n: string): string => {
      fs.writeFileSync(path.join(shared, 'lib/db/data'), `state ${n}\n`);
      return hashTree(shared);
    };
    for (const n of ['A', 'B']) {
      await s.stage({ label: n, files: [{ path: '/etc/motd', contents: `${n}\n` }] });
      await reboot(s);
      await s.markGood();
    }
    let h = write('1');
    await s.rollback();
    await s.boot();
    expect(hashTree(shared)).toBe(h);
    h = write('2');
    await s.stage({ label: 'C', files: [{ path: '/etc/motd', contents: 'C\n' }] });
    await reboot(s);
    await s.markBad('health failed');
    expect(hashTree(shared)).toBe(h);
    await s.boot();
    h = write('3');
    await s.stage({ label: 'D', files: [{ path: '/etc/motd', contents: 'D\n' }] });
    await s.finalize();
    for (let i = 0; i < 4; i++) await s.boot(); // no tries left: automatic fallback
    expect(s.status().lastFailure).toMatchObject({ phase: 'boot' });
    expect(hashTree(shared)).toBe(h);
    const pruned = await s.prune({ keep: 1 });
    expect(pruned.removed.length).toBeGreaterThan(0);
    expect(hashTree(shared)).toBe(h);
    expect(read(path.join(shared, 'lib/db/data'))).toBe('state 3\n');
  });

  it('spec entries under var/ are checked at stage and applied at finalize, each previous version kept aside and reported', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const shared = s.status().shared.var!;
    fs.chmodSync(path.join(shared, 'lib/db/data'), 0o600);
    const before = hashTree(shared);
    await expect(s.stage({ files: [{ path: '/var/../../etc/x', contents: 'x' }] })).rejects.toMatchObject({ code: 'SPEC_INVALID' });
    await expect(s.stage({ files: [{ path: '/var/log/app.log', contents: 'more\n', append: true }] })).rejects.toMatchObject({ code: 'SOURCE_UNSUPPORTED', path: 'var/log/app.log' });
    await expect(s.stage({ remove: ['/var/nothing-here'] })).rejects.toMatchObject({ code: 'APPLY_FAILED', path: 'var/nothing-here' });
    await expect(s.stage({ remove: ['/var'] })).rejects.toMatchObject({ code: 'APPLY_FAILED', path: 'var' });
    const r = await s.stage({
      files: [
        { path: '/var/lib/kubelet/config.json', contents: '{"v":2}\n', mode: '0640' },
        { path: '/var/lib/db/data', contents: 'desired\n' },
        { path: '/var/lib/seed', contents: 'only if absent\n', overwrite: false },
        { path: '/var/log/app.log', contents: 'boot\n' }, // the same as the live one: nothing to keep
      ],
      remove: ['/var/cache/x'],
    });
    expect(hashTree(shared)).toBe(before); // stage never writes the shared /var
    expect(fs.readdirSync(path.join(r.path, 'var'))).toEqual([]);
    fs.writeFileSync(path.join(shared, 'lib/seed'), 'made by the machine\n');
    await expect(s.finalize()).resolves.toMatchObject({ finalized: true });
    expect(read(path.join(shared, 'lib/kubelet/config.json'))).toBe('{"v":2}\n');
    expect(fs.statSync(path.join(shared, 'lib/kubelet/config.json')).mode & 0o7777).toBe(0o640);
    expect(read(path.join(shared, 'lib/db/data'))).toBe('desired\n');
    expect(read(path.join(shared, 'lib/seed'))).toBe('made by the machine\n');
    expect(fs.existsSync(path.join(shared, 'cache/x'))).toBe(false);
    const merge = s.status().lastMerge!;
    expect([...merge.conflicts].sort((x, y) => x.path.localeCompare(y.path))).toEqual([
      { path: 'var/cache/x', kept: path.join(t.dir, 'kept', r.id, 'var/cache/x') },
      { path: 'var/lib/db/data', kept: path.join(t.dir, 'kept', r.id, 'var/lib/db/data') },
    ]);
    const kept = path.join(t.dir, 'kept', r.id, 'var/lib/db/data');
    expect(read(kept)).toBe('row1\n');
    expect(fs.statSync(kept).mode & 0o7777).toBe(0o600); // as private as the original
    expect(read(path.join(t.dir, 'kept', r.id, 'var/cache/x'))).toBe('c\n');
  });

  it('a desired file where the live /var has a directory is refused at stage (exit 3) and, when it appears later, at finalize (exit 1)', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const shared = s.status().shared.var!;
    await expect(s.stage({ files: [{ path: '/var/lib/db', contents: 'a file\n' }] })).rejects.toMatchObject({ code: 'MERGE_CONFLICT', path: 'var/lib/db' });
    const r = await s.stage({ files: [{ path: '/var/lib/later', contents: 'a file\n' }] });
    fs.mkdirSync(path.join(shared, 'lib/later/inside'), { recursive: true });
    await expect(s.finalize()).rejects.toMatchObject({ code: 'FINALIZE_FAILED', path: 'var/lib/later' });
    expect(s.status()).toMatchObject({ current: '0001', staged: null, lastFailure: { id: r.id, phase: 'finalize' } });
    expect(fs.statSync(path.join(shared, 'lib/later/inside')).isDirectory()).toBe(true);
  });

  it('tar layer entries under var/ are initial content: added where absent, never overwriting or deleting state', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const shared = s.status().shared.var!;
    const layer = path.join(t.scratch, 'layer.tar');
    fs.writeFileSync(layer, tarArchive([
      { name: 'etc/motd', body: 'from the layer\n' },
      { name: 'var/lib/db/data', body: 'image default\n' },
      { name: 'var/lib/new/', type: 'dir', mode: 0o750 },
      { name: 'var/lib/new/file', body: 'image file\n' },
      { name: 'var/cache/.wh.x', body: '' },
      { name: 'var/log/.wh..wh..opq', body: '' },
    ]));
    const before = hashTree(shared);
    const r = await s.stage(tarLayerSource(layer));
    expect(hashTree(shared)).toBe(before);
    expect(fs.readdirSync(path.join(r.path, 'var'))).toEqual([]);
    await reboot(s);
    expect(read(path.join(shared, 'lib/db/data'))).toBe('row1\n');
    expect(read(path.join(shared, 'lib/new/file'))).toBe('image file\n');
    expect(fs.statSync(path.join(shared, 'lib/new')).mode & 0o7777).toBe(0o750);
    expect(read(path.join(shared, 'cache/x'))).toBe('c\n');
    expect(read(path.join(shared, 'log/app.log'))).toBe('boot\n');
    expect(s.status().lastMerge!.conflicts).toEqual([]);
    expect(read(path.join(s.treePath(r.id), 'etc/motd'))).toBe('from the layer\n');
  });

  it('Ignition writes through the tree\'s home -> var/home into the shared /var at finalize', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'm\n', home: { symlink: 'var/home' }, 'var/home/core/.profile': 'p\n' } });
    const s = t.sysroot;
    const shared = s.status().shared.var!;
    const cfg = { ignition: { version: '3.4.0' }, storage: { files: [{ path: '/home/core/.ssh/authorized_keys', mode: 0o600, contents: { source: 'data:,ssh-ed25519%20AAAA%20me%0A' } }] } };
    const r = await s.stage(cfg);
    expect(fs.existsSync(path.join(shared, 'home/core/.ssh'))).toBe(false);
    expect(fs.readdirSync(path.join(r.path, 'var'))).toEqual([]);
    await reboot(s);
    expect(read(path.join(shared, 'home/core/.ssh/authorized_keys'))).toBe('ssh-ed25519 AAAA me\n');
    expect(fs.statSync(path.join(shared, 'home/core/.ssh/authorized_keys')).mode & 0o7777).toBe(0o600);
    expect(read(path.join(shared, 'home/core/.profile'))).toBe('p\n');
  });

  it('var/.updated is cleared at finalize (ConditionNeedsUpdate= units run once after the update)', async () => {
    t = await tempSysroot({ tree: TREE });
    const shared = t.sysroot.status().shared.var!;
    fs.writeFileSync(path.join(shared, '.updated'), '');
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    expect(fs.existsSync(path.join(shared, '.updated'))).toBe(true);
    await t.sysroot.finalize();
    expect(fs.existsSync(path.join(shared, '.updated'))).toBe(false);
  });

  it('open upgrades a sysroot made before shared directories: the booted var/ moves to shared/var, nothing dropped', async () => {
    t = await tempSysroot({ tree: TREE, shared: [] });
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    await reboot(t.sysroot);
    await t.sysroot.markGood();
    // What an earlier stagedroot wrote: no `shared` in the state, no shared.list.
    const stateFile = path.join(t.dir, 'state.json');
    for (const f of [stateFile, `${stateFile}.bak`]) {
      const raw = JSON.parse(read(f)) as Record<string, unknown>;
      delete raw.shared;
      delete raw.merged;
      fs.writeFileSync(f, JSON.stringify(raw));
    }
    fs.rmSync(path.join(t.dir, 'shared.list'));
    const booted = t.sysroot.treePath('0002');
    fs.appendFileSync(path.join(booted, 'var/lib/db/data'), 'row2\n');
    const ro = await Sysroot.open(t.dir, { readOnly: true });
    expect(ro.status().shared).toEqual({});
    const s = await Sysroot.open(t.dir);
    expect(s.recovery.join('\n')).toMatch(/upgraded to a shared \/var/);
    const shared = s.status().shared.var!;
    expect(shared).toBe(path.join(t.dir, 'shared', 'var'));
    expect(read(path.join(shared, 'lib/db/data'))).toBe('row1\nrow2\n');
    expect(fs.readdirSync(path.join(booted, 'var'))).toEqual([]);
    expect(read(path.join(t.dir, 'shared.list'))).toBe('var\n');
    expect((await s.verify('0002')).drift).toEqual([]);
    // The older deployment keeps its var/ (hidden under the mount if it ever boots).
    expect(read(path.join(s.treePath('0001'), 'var/lib/db/data'))).toBe('row1\n');
    expect((await s.verify('0001')).drift).toEqual([]);
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'y\n' }] });
    expect(fs.readdirSync(path.join(r.path, 'var'))).toEqual([]);
  });
});
