/**
 * The /etc 3-way merge at finalize, on temp-dir sysroots (the booted tree is the running
 * system's root): local changes made before or after stage are in the new deployment
 * after the reboot; the update wins on its own paths, the local version kept and
 * reported; type conflicts are refused at stage and at finalize with nothing lost.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { finalize } from '../../src/commit/finalize.js';
import { makeContext } from '../../src/context.js';
import { hashFile } from '../../src/fs/core/hash.js';
import { manifestDigest, overlayFile, readOverlay } from '../../src/fs/manifests/manifest-overlay.js';
import { readManifest } from '../../src/fs/manifests/manifest.js';
import { tarLayerSource } from '../../src/sources/tar/layer-source.js';
import { Sysroot } from '../../src/sysroot.js';
import { hashTree, reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { tarArchive } from '../../fixtures/tar-writer.mjs';
import { BASE_TREE } from '../helpers/trees.js';

const TREE = { ...BASE_TREE, 'etc/app.conf': 'listen = 80\n', 'etc/shadow': { content: 'root:old:1::::::\n', mode: 0o600 }, 'etc/conf.d/a': 'a\n', 'etc/conf.d/b': 'b\n' };
const read = (p: string): string => fs.readFileSync(p, 'utf8');

describe('/etc merge at finalize', () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());

  it('carries every local change made before or after stage; untouched files follow the update; the old tree stays as it was', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const live = s.treePath('0001');
    const etc = (p: string): string => path.join(live, 'etc', p);
    fs.writeFileSync(etc('before-stage.conf'), 'made before the stage\n');
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'new motd\n' }, { path: '/etc/conf.d/c', contents: 'c\n' }] });
    // What the running system does after the stage:
    fs.writeFileSync(etc('app.conf'), 'listen = 8080\n');
    fs.writeFileSync(etc('added.conf'), 'added\n');
    fs.unlinkSync(etc('old.conf'));
    fs.rmSync(etc('conf.d/b'));
    fs.chmodSync(etc('hostname'), 0o600);
    fs.unlinkSync(etc('localtime'));
    fs.symlinkSync('/usr/share/zoneinfo/Europe/Paris', etc('localtime'));
    fs.mkdirSync(etc('new.d'));
    fs.writeFileSync(etc('new.d/x.conf'), 'x\n');
    fs.unlinkSync(etc('before-stage.conf')); // made before the stage, deleted after: gone
    const liveHash = hashTree(live);

    const fin = await s.finalize();
    expect(fin).toMatchObject({ finalized: true, id: r.id, merge: { id: r.id, conflicts: [] } });
    // The merge is recorded as the manifest's overlay, the manifest itself as staged; the
    // checksum recorded covers both, and the base's sha256 is the one recorded at stage.
    const manifest = path.join(t.dir, 'deploy', r.id, 'manifest.ndjson');
    const stagedSha = hashFile(manifest);
    expect(readOverlay(manifest)?.base).toBe(stagedSha);
    expect([...readOverlay(manifest)!.dirty]).toEqual(expect.arrayContaining(['etc/app.conf', 'etc/added.conf', 'etc/old.conf', 'etc/new.d/x.conf']));
    expect(s.state().deployments.find((d) => d.id === r.id)?.manifestSha256).toBe(manifestDigest(manifest));
    // Read through the overlay, the manifest is the merged tree's.
    const lines = new Map([...readManifest(manifest)].map((e) => [e.p, e]));
    expect(lines.has('etc/old.conf')).toBe(false);
    expect(lines.get('etc/localtime')).toMatchObject({ t: 'l', l: '/usr/share/zoneinfo/Europe/Paris' });
    expect(lines.get('etc/hostname')?.m).toBe(0o600);
    expect(hashTree(live)).toBe(liveHash); // the old booted tree (the rollback) is left as it was
    await s.boot();
    const cur = s.treePath(s.status().booted!);
    const got = (p: string): string => read(path.join(cur, 'etc', p));
    expect(got('app.conf')).toBe('listen = 8080\n');
    expect(got('added.conf')).toBe('added\n');
    expect(fs.existsSync(path.join(cur, 'etc/old.conf'))).toBe(false);
    expect(fs.readdirSync(path.join(cur, 'etc/conf.d')).sort()).toEqual(['a', 'c']);
    expect(fs.statSync(path.join(cur, 'etc/hostname')).mode & 0o7777).toBe(0o600);
    expect(fs.readlinkSync(path.join(cur, 'etc/localtime'))).toBe('/usr/share/zoneinfo/Europe/Paris');
    expect(got('new.d/x.conf')).toBe('x\n');
    expect(fs.existsSync(path.join(cur, 'etc/before-stage.conf'))).toBe(false);
    expect(got('motd')).toBe('new motd\n');
    expect(got('ssh/sshd_config')).toBe('PermitRootLogin no\n');
    // app.conf, added.conf, old.conf, conf.d/b, hostname, localtime, new.d, new.d/x.conf, before-stage.conf
    expect(s.status().lastMerge).toMatchObject({ id: r.id, carried: 9, conflicts: [] });
    expect((await s.verify(r.id)).drift).toEqual([]);
  });

  it('the update wins on its own paths (even rewriting the same content); the local version is kept with its mode and reported', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const live = s.treePath('0001');
    fs.writeFileSync(path.join(live, 'etc/shadow'), 'root:rotated:2::::::\n'); // before the stage
    const r = await s.stage({
      files: [
        { path: '/etc/shadow', contents: 'root:managed:3::::::\n', mode: '0600' },
        { path: '/etc/app.conf', contents: 'listen = 80\n' }, // the same content as deployed: still the update's path
      ],
      remove: ['/etc/conf.d/a'],
    });
    fs.writeFileSync(path.join(live, 'etc/app.conf'), 'listen = 9090\n'); // after the stage
    fs.writeFileSync(path.join(live, 'etc/conf.d/a'), 'edited\n');
    fs.unlinkSync(path.join(live, 'etc/motd')); // not the update's: carried
    await reboot(s);
    const cur = s.treePath(r.id);
    expect(read(path.join(cur, 'etc/shadow'))).toBe('root:managed:3::::::\n');
    expect(read(path.join(cur, 'etc/app.conf'))).toBe('listen = 80\n');
    expect(fs.existsSync(path.join(cur, 'etc/conf.d/a'))).toBe(false);
    expect(fs.existsSync(path.join(cur, 'etc/motd'))).toBe(false);
    const kept = (p: string): string => path.join(t!.dir, 'kept', r.id, p);
    expect(s.status().lastMerge).toEqual({
      id: r.id,
      at: expect.any(String),
      carried: 1,
      conflicts: [
        { path: 'etc/app.conf', kept: kept('etc/app.conf') },
        { path: 'etc/conf.d/a', kept: kept('etc/conf.d/a') },
        { path: 'etc/shadow', kept: kept('etc/shadow') },
      ],
    });
    expect(read(kept('etc/shadow'))).toBe('root:rotated:2::::::\n');
    expect(fs.statSync(kept('etc/shadow')).mode & 0o7777).toBe(0o600);
    expect(fs.statSync(path.join(t.dir, 'kept')).mode & 0o077).toBe(0); // the kept area is private
    expect(read(kept('etc/app.conf'))).toBe('listen = 9090\n');
    expect((await s.verify(r.id)).drift).toEqual([]);
  });

  it('a type conflict that exists at stage is refused there (MERGE_CONFLICT, exit 3), the paths listed', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const live = s.treePath('0001');
    fs.mkdirSync(path.join(live, 'etc/tool.conf'));
    fs.writeFileSync(path.join(live, 'etc/tool.conf/local'), 'mine\n');
    const layer = path.join(t.scratch, 'layer.tar');
    fs.writeFileSync(layer, tarArchive([{ name: 'etc/tool.conf', body: 'a file now\n' }]));
    const err = await s.stage(tarLayerSource(layer)).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'MERGE_CONFLICT', isRejection: true, path: 'etc/tool.conf', issues: [{ code: 'MERGE_CONFLICT', path: 'etc/tool.conf' }] });
    expect((err as Error).message).toMatch(/Merge conflicts found/);
    expect(s.status()).toMatchObject({ staged: null, lastFailure: { phase: 'apply', code: 'MERGE_CONFLICT' } });
    expect(read(path.join(live, 'etc/tool.conf/local'))).toBe('mine\n');
  });

  it('a type conflict that appears after stage fails finalize (exit 1): current unchanged, nothing lost, reported by the next boot', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const live = s.treePath('0001');
    const r = await s.stage({ files: [{ path: '/etc/tool.conf', contents: 'managed\n' }] });
    fs.mkdirSync(path.join(live, 'etc/tool.conf'));
    fs.writeFileSync(path.join(live, 'etc/tool.conf/local'), 'mine\n');
    const stagedHash = hashTree(s.treePath(r.id));
    const err = await s.finalize().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'FINALIZE_FAILED', path: 'etc/tool.conf' });
    expect((err as Error).message).toMatch(/etc\/tool.conf \(local directory, update file\)/);
    expect(s.status()).toMatchObject({ current: '0001', staged: null, lastFailure: { id: r.id, phase: 'finalize', path: 'etc/tool.conf', issues: [{ path: 'etc/tool.conf' }] } });
    expect(hashTree(s.treePath(r.id))).toBe(stagedHash);
    expect(read(path.join(live, 'etc/tool.conf/local'))).toBe('mine\n');
    const b = await s.boot();
    expect(b.finalizeFailure).toMatchObject({ id: r.id, phase: 'finalize' });
    expect(s.status().booted).toBe('0001');
  });

  it('etc/.updated is not carried into the new deployment', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    fs.writeFileSync(path.join(s.treePath('0001'), 'etc/.updated'), '# stamp\n');
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    expect(fs.existsSync(path.join(r.path, 'etc/.updated'))).toBe(true); // copied at stage ...
    await s.finalize();
    expect(fs.existsSync(path.join(r.path, 'etc/.updated'))).toBe(false); // ... cleared at finalize
    expect((await s.verify(r.id)).drift).toEqual([]);
  });

  it('rollback does not merge: the rollback target boots with the etc/ it had, /var is left alone', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const shared = s.status().shared.var!;
    const first = s.treePath('0001');
    fs.writeFileSync(path.join(first, 'etc/app.conf'), 'listen = 81\n'); // a local edit while 0001 ran
    await s.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    await reboot(s);
    await s.markGood();
    const second = s.treePath('0002');
    fs.writeFileSync(path.join(second, 'etc/app.conf'), 'listen = 82\n'); // an edit while 0002 runs
    fs.writeFileSync(path.join(shared, 'state'), 'written by 0002\n');
    await s.rollback();
    await s.boot();
    expect(s.status().booted).toBe('0001');
    expect(read(path.join(first, 'etc/app.conf'))).toBe('listen = 81\n');
    expect(read(path.join(shared, 'state'))).toBe('written by 0002\n');
  });

  it('an I/O error while the manifest\'s overlay is written: nothing is renamed, current is unchanged, recovery completes the merge', async () => {
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const live = s.treePath('0001');
    const r = await s.stage({ files: [{ path: '/etc/motd', contents: 'new motd\n' }] });
    fs.writeFileSync(path.join(live, 'etc/app.conf'), 'listen = 8080\n');
    const manifest = path.join(t.dir, 'deploy', r.id, 'manifest.ndjson');
    const before = hashFile(manifest);
    // The stage's own overlay (the manifest is a link to its base's file): the failed merge leaves it as it was.
    const staged = fs.existsSync(overlayFile(manifest)) ? fs.readFileSync(overlayFile(manifest), 'utf8') : null;
    const ops: string[] = [];
    const ctx = makeContext(t.dir, {
      faults: {
        afterMutation(op, p) {
          ops.push(`${op} ${path.basename(p)}`);
          // The temp file of the overlay: the next one in deploy/ID after the merge marker.
          if (op === 'create' && path.dirname(p) === path.dirname(manifest) && ops.includes('rename merging.json')) throw Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO' });
        },
      },
    });
    await expect(finalize(ctx, s.state())).rejects.toThrow(/EIO/);
    expect(ops.some((o) => o.startsWith('rename') && o.endsWith('.overlay'))).toBe(false);
    expect(fs.existsSync(overlayFile(manifest)) ? fs.readFileSync(overlayFile(manifest), 'utf8') : null).toBe(staged);
    expect(fs.readdirSync(path.dirname(manifest)).filter((n) => n.startsWith('.stagedroot-tmp-'))).toEqual([]);
    expect(hashFile(manifest)).toBe(before);
    expect(fs.realpathSync(path.join(t.dir, 'current'))).toBe(fs.realpathSync(live));
    // Opening the sysroot (recovery) redoes the merge the error cut short; finalize then completes.
    const again = await Sysroot.open(t.dir);
    expect(again.status()).toMatchObject({ current: '0001', staged: r.id });
    expect(again.state().deployments.find((d) => d.id === r.id)?.manifestSha256).toBe(manifestDigest(manifest));
    expect(hashFile(manifest)).toBe(before); // recorded in the overlay, the manifest untouched
    expect((await again.verify(r.id)).drift).toEqual([]);
    await reboot(again);
    expect(read(path.join(again.treePath(r.id), 'etc/app.conf'))).toBe('listen = 8080\n');
    expect(read(path.join(again.treePath(r.id), 'etc/motd'))).toBe('new motd\n');
  });
});

describe('/etc merge at finalize over names that are not UTF-8', () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());

  it('carries a locally added directory with latin-1 names byte for byte', async () => {
    const L = Buffer.from('caf\xe9', 'latin1');
    const at = (...parts: (string | Buffer)[]): Buffer => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
    t = await tempSysroot({ tree: TREE });
    const s = t.sysroot;
    const live = s.treePath('0001');
    await s.stage({ files: [{ path: '/etc/motd', contents: 'new motd\n' }] });
    // The running system adds etc/café/café and etc/café.conf (latin-1 bytes) after the stage.
    fs.mkdirSync(at(live, '/etc/', L));
    fs.writeFileSync(at(live, '/etc/', L, '/', L), 'inner\n');
    fs.writeFileSync(at(live, '/etc/', L, '.conf'), 'beside\n');
    const liveHash = hashTree(path.join(live, 'etc'), { exclude: ['motd'] });
    await reboot(s);
    expect(s.status().lastMerge).toMatchObject({ carried: 3, conflicts: [] }); // the directory and its two latin-1 names
    const now = path.join(t.dir, 'current');
    expect(read(path.join(now, 'etc/motd'))).toBe('new motd\n');
    expect(fs.readFileSync(at(now, '/etc/', L, '/', L), 'utf8')).toBe('inner\n');
    expect(fs.readFileSync(at(now, '/etc/', L, '.conf'), 'utf8')).toBe('beside\n');
    expect(hashTree(path.join(now, 'etc'), { exclude: ['motd'] })).toBe(liveHash);
    expect((await s.verify()).drift).toEqual([]);
  });
});
