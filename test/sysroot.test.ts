import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../src/sysroot.js';
import type { StageProgress } from '../src/stage/stage.js';
import { buildTree, hashTree, reboot, tempSysroot, type TempSysroot } from '../src/testing/index.js';
import { BASE_TREE, motdUpdate } from './helpers/trees.js';

/** The field tables of docs/status-json.md (`| field | type | meaning |`), each field's type column by name. */
function documentedTables(): Record<string, string>[] {
  const md = fs.readFileSync(path.join(import.meta.dirname, '../docs/status-json.md'), 'utf8');
  return md.split('| field | type | meaning |').slice(1).map((table) => {
    const out: Record<string, string> = {};
    for (const line of table.split('\n').slice(2)) {
      if (!line.startsWith('|')) break;
      const [names, type] = line.split('|').slice(1, 3).map((c) => c.trim());
      for (const n of names!.matchAll(/`([A-Za-z]+)`/g)) out[n[1]!] = type!;
    }
    return out;
  });
}

/** A JSON value against a documented type ("id or null", "boolean", "array of strings", "`ready` or `failed`", …). */
function hasType(v: unknown, type: string): boolean {
  if (v === null) return /\bnull\b/.test(type);
  if (Array.isArray(v)) return /\barray\b/.test(type);
  if (typeof v === 'object') return /\b(object|failure)\b/.test(type);
  if (typeof v === 'boolean' || typeof v === 'number') return new RegExp(`\\b${typeof v}\\b`).test(type);
  if (typeof v === 'string') return /\b(id|string)\b/.test(type) || type.includes(`\`${v}\``) || type.includes(`"${v}"`);
  return false;
}

const isRoot = process.getuid?.() === 0;

function ids(s: Sysroot): string[] {
  return s.status().deployments.map((d) => d.id).sort();
}

/** Stages, reboots into and marks good an update (a full successful cycle). */
async function goodUpdate(s: Sysroot, name: string): Promise<string> {
  const { id } = await s.stage(motdUpdate(name));
  await reboot(s);
  await s.markGood();
  return id;
}

describe('Sysroot lifecycle (library)', () => {
  let t: TempSysroot;
  afterEach(() => t?.cleanup());

  it('init with an empty first deployment: current, booted and good', async () => {
    t = await tempSysroot();
    const st = t.sysroot.status();
    expect(st).toMatchObject({ current: '0001', booted: '0001', staged: null, rollback: null, pendingReboot: false, lastFailure: null });
    expect(st.deployments).toEqual([expect.objectContaining({ id: '0001', label: 'initial', good: true, path: path.join(t.dir, 'deploy', '0001', 'tree') })]);
    // Only the mount point of the shared /var, empty.
    expect(fs.readdirSync(st.deployments[0]!.path)).toEqual(['var']);
    expect(fs.readdirSync(path.join(st.deployments[0]!.path, 'var'))).toEqual([]);
    expect(st.shared).toEqual({ var: path.join(t.dir, 'shared', 'var') });
    expect(fs.readlinkSync(path.join(t.dir, 'current'))).toBe('deploy/0001/tree');
    expect((await t.sysroot.verify()).drift).toEqual([]);
  });

  it('init from a directory copies the tree; a second init is refused', async () => {
    t = await tempSysroot({ tree: BASE_TREE, label: 'base' });
    const tree = t.sysroot.treePath('0001');
    fs.mkdirSync(path.join(t.scratch, 'initial-tree', 'var')); // the tree gains the (empty) mount point of the shared /var
    expect(hashTree(tree)).toBe(hashTree(path.join(t.scratch, 'initial-tree')));
    expect(t.sysroot.status().deployments[0]).toMatchObject({ label: 'base', entries: 17 });
    expect((await t.sysroot.verify('0001')).drift).toEqual([]);
    await expect(Sysroot.init(t.dir)).rejects.toMatchObject({ code: 'SYSROOT_EXISTS' });
    await expect(Sysroot.init(path.join(t.scratch, 'x'), { fromDirectory: path.join(t.scratch, 'nope') })).rejects.toMatchObject({ code: 'USAGE', option: 'from' });
  });

  it('stage → finalize → boot → mark-good, with the booted tree untouched until the reboot', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    const booted = t.sysroot.treePath('0001');
    const before = hashTree(booted);
    const progress: StageProgress['phase'][] = [];
    const r = await t.sysroot.stage(
      { label: 'web', files: [{ path: '/etc/motd', contents: 'web\n', mode: '0640' }, { path: '/srv/www/index.html', contents: { base64: 'aGk=' } }], remove: ['/etc/old.conf'] },
      { onProgress: (p) => progress.push(p.phase) },
    );
    expect(r).toMatchObject({ id: '0002', label: 'web', path: t.sysroot.treePath('0002') });
    // every path the stage changed: written, or removed (etc/old.conf)
    expect(r.delta).toEqual(['etc/motd', 'etc/old.conf', 'srv', 'srv/www', 'srv/www/index.html']);
    expect(new Set(progress)).toEqual(new Set(['plan', 'copy', 'apply', 'manifest', 'validate', 'sync', 'commit']));
    expect(hashTree(booted)).toBe(before);
    expect(t.sysroot.status()).toMatchObject({ staged: '0002', current: '0001', booted: '0001', pendingReboot: false });

    // usr/ is shared with the booted tree (hardlinks); the rest is a private copy.
    const inode = (id: string, p: string): number => fs.statSync(path.join(t.sysroot.treePath(id), p)).ino;
    expect(inode('0002', 'usr/bin/tool')).toBe(inode('0001', 'usr/bin/tool'));
    expect(inode('0002', 'etc/hostname')).not.toBe(inode('0001', 'etc/hostname'));
    const staged = t.sysroot.treePath('0002');
    expect(fs.readFileSync(path.join(staged, 'etc/motd'), 'utf8')).toBe('web\n');
    expect(fs.statSync(path.join(staged, 'etc/motd')).mode & 0o7777).toBe(0o640);
    expect(fs.existsSync(path.join(staged, 'etc/old.conf'))).toBe(false);
    expect((await t.sysroot.verify('0002')).drift).toEqual([]);

    await expect(t.sysroot.finalize()).resolves.toEqual({ finalized: true, id: '0002', previous: '0001', merge: { id: '0002', at: expect.any(String), carried: 0, conflicts: [] } });
    expect(t.sysroot.status()).toMatchObject({ current: '0002', booted: '0001', rollback: '0001', staged: null, pendingReboot: true });
    expect(fs.realpathSync(path.join(t.dir, 'current'))).toBe(fs.realpathSync(staged));
    await expect(t.sysroot.finalize()).resolves.toEqual({ finalized: false, reason: 'nothing-staged' });

    await expect(t.sysroot.boot()).resolves.toMatchObject({ event: { kind: 'booted', id: '0002', triesLeft: 2 }, finalizeFailure: null });
    expect(t.sysroot.status()).toMatchObject({ booted: '0002', pendingReboot: false });
    const good = await t.sysroot.markGood();
    expect(good.deployments.find((d) => d.id === '0002')).toMatchObject({ good: true, triesLeft: null, booted: true, current: true });
    expect(hashTree(booted)).toBe(before);
  });

  it('mark-bad sends current back to the last good deployment; the next boot runs it', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await t.sysroot.stage(motdUpdate('A'));
    await reboot(t.sysroot);
    const st = await t.sysroot.markBad('web check failed');
    expect(st).toMatchObject({ current: '0001', booted: '0002', pendingReboot: true });
    expect(st.lastFailure).toMatchObject({ id: '0002', label: 'A', phase: 'health', reason: 'web check failed' });
    expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ failed: true, good: false });
    await reboot(t.sysroot);
    expect(t.sysroot.status()).toMatchObject({ booted: '0001', current: '0001' });
  });

  it('three boots without mark-good: the fourth boots the last good deployment', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await t.sysroot.stage(motdUpdate('A'));
    await t.sysroot.finalize();
    for (const left of [2, 1, 0]) await expect(t.sysroot.boot()).resolves.toMatchObject({ event: { kind: 'booted', id: '0002', triesLeft: left } });
    await expect(t.sysroot.boot()).resolves.toMatchObject({ event: { kind: 'fell-back', from: '0002', to: '0001' } });
    expect(t.sysroot.status()).toMatchObject({ current: '0001', booted: '0001', lastFailure: { id: '0002', phase: 'boot' } });
    expect(fs.readlinkSync(path.join(t.dir, 'current'))).toBe('deploy/0001/tree');
  });

  it('rollback: the previous good deployment becomes current; refused while something is staged', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await goodUpdate(t.sysroot, 'A');
    await t.sysroot.stage(motdUpdate('B'));
    await expect(t.sysroot.rollback()).rejects.toMatchObject({ code: 'INVALID_TRANSITION', value: '0003' });
    expect(t.sysroot.status()).toMatchObject({ current: '0002', staged: '0003' });
    const st = await t.sysroot.rollback({ discardStaged: true });
    expect(st).toMatchObject({ current: '0001', rollback: '0002', booted: '0002', staged: null, pendingReboot: true });
    expect(fs.existsSync(path.join(t.dir, 'deploy', '0003'))).toBe(false);
    await reboot(t.sysroot);
    expect(t.sysroot.status()).toMatchObject({ booted: '0001', current: '0001', rollback: '0002' });
    // And back again.
    await t.sysroot.rollback();
    await reboot(t.sysroot);
    expect(t.sysroot.status()).toMatchObject({ booted: '0002', rollback: '0001' });
  });

  it('discardStaged drops the staged deployment and its tree', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await t.sysroot.stage(motdUpdate('A'));
    await expect(t.sysroot.discardStaged()).resolves.toEqual({ removed: '0002' });
    expect(t.sysroot.status().staged).toBeNull();
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual(['0001']);
    await expect(t.sysroot.discardStaged()).rejects.toMatchObject({ code: 'NOTHING_STAGED' });
  });

  it('prune --keep never removes booted, current, staged, rollback or pinned deployments', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    for (const n of ['A', 'B', 'C', 'D']) await goodUpdate(t.sysroot, n); // 0002..0005
    await t.sysroot.pin('0002');
    await t.sysroot.rollback(); // current 0004, rollback 0005, booted 0005
    await t.sysroot.stage(motdUpdate('E')); // 0006 staged
    expect(ids(t.sysroot)).toEqual(['0001', '0002', '0003', '0004', '0005', '0006']);
    await expect(t.sysroot.prune({ keep: 0 })).resolves.toEqual({ removed: ['0003', '0001'] });
    expect(ids(t.sysroot)).toEqual(['0002', '0004', '0005', '0006']);
    expect(fs.readdirSync(path.join(t.dir, 'deploy')).sort()).toEqual(['0002', '0004', '0005', '0006']);
    const st = t.sysroot.status();
    expect(st).toMatchObject({ current: '0004', booted: '0005', rollback: '0005', staged: '0006' });
    expect((await t.sysroot.verify('0004')).drift).toEqual([]);
    await expect(t.sysroot.prune({ keep: 0 })).resolves.toEqual({ removed: [] });
    await t.sysroot.pin('0002', false);
    await expect(t.sysroot.prune({ keep: 3 })).resolves.toEqual({ removed: ['0002'] });
  });

  // Regression: bad input to stage/prune threw synchronously from a promise-returning
  // method, escaping a caller's `.catch()`.
  it('bad input to stage and prune rejects the promise', async () => {
    t = await tempSysroot();
    await expect(t.sysroot.prune({ keep: -1 })).rejects.toMatchObject({ code: 'USAGE', option: 'keep', value: -1 });
    await expect(t.sysroot.prune({ keep: 1.5 })).rejects.toMatchObject({ code: 'USAGE' });
    await expect(t.sysroot.stage(path.join(t.scratch, 'no-such-spec.json'))).rejects.toMatchObject({ code: 'USAGE' });
  });

  it('prune --keep N keeps the N newest', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    for (const n of ['A', 'B', 'C']) await goodUpdate(t.sysroot, n); // 0002..0004; rollback 0003
    await expect(t.sysroot.prune({ keep: 2 })).resolves.toEqual({ removed: ['0002', '0001'] });
    expect(ids(t.sysroot)).toEqual(['0003', '0004']);
    expect(t.sysroot.status()).toMatchObject({ current: '0004', rollback: '0003' });
  });

  it('diff lists added, removed and modified paths by manifest', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await t.sysroot.stage({
      files: [{ path: '/etc/motd', contents: 'changed\n' }, { path: '/etc/new.conf', contents: 'n=1\n' }, { path: '/etc/hostname', contents: 'node-1\n', mode: '0600' }],
      symlinks: [{ path: '/etc/localtime', target: '/usr/share/zoneinfo/Europe/Paris' }],
      remove: ['/etc/old.conf'],
    });
    expect(await t.sysroot.diff('0001', '0002')).toEqual([
      { path: 'etc/hostname', change: 'modified', what: ['mode'] },
      { path: 'etc/localtime', change: 'modified', what: ['target'] },
      { path: 'etc/motd', change: 'modified', what: ['content'] },
      { path: 'etc/new.conf', change: 'added' },
      { path: 'etc/old.conf', change: 'removed' },
    ]);
    expect(await t.sysroot.diff('0002', '0002')).toEqual([]);
    await expect(t.sysroot.diff('0001', '0042')).rejects.toThrow(expect.objectContaining({ code: 'NOT_FOUND', value: '0042' }));
  });

  it('verify reports drift: content, mode, owner, type, target, missing and extra', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    const tree = t.sysroot.treePath('0001');
    expect((await t.sysroot.verify()).drift).toEqual([]);
    fs.writeFileSync(path.join(tree, 'etc/motd'), 'edited on the host\n');
    fs.chmodSync(path.join(tree, 'etc/hostname'), 0o666);
    fs.rmSync(path.join(tree, 'etc/old.conf'));
    fs.mkdirSync(path.join(tree, 'etc/extra.d'));
    fs.rmSync(path.join(tree, 'bin'));
    fs.writeFileSync(path.join(tree, 'bin'), 'not a link\n');
    fs.rmSync(path.join(tree, 'etc/localtime'));
    fs.symlinkSync('/elsewhere', path.join(tree, 'etc/localtime'));
    if (isRoot) fs.chownSync(path.join(tree, 'etc/ssh/sshd_config'), 1000, 1000);
    else console.warn('verify owner drift: not root, cannot chown; the owner case is not exercised');
    const { id, drift } = await t.sysroot.verify();
    expect(id).toBe('0001');
    const kinds = drift.map((d) => `${d.kind} ${d.path}`);
    expect(kinds).toEqual(
      expect.arrayContaining([
        'type bin',
        'target etc/localtime',
        'content etc/motd',
        'mode etc/hostname',
        'missing etc/old.conf',
        'extra etc/extra.d',
        ...(isRoot ? ['owner etc/ssh/sshd_config'] : []),
      ]),
    );
    expect(drift).toHaveLength(isRoot ? 7 : 6);
    expect(drift.find((d) => d.kind === 'mode')).toMatchObject({ expected: '0644', actual: '0666' });
    if (isRoot) expect(drift.find((d) => d.kind === 'owner')).toMatchObject({ expected: '0:0', actual: '1000:1000' });
  });

  it('a validator error rejects the stage, keeps the tree as failed, and a later stage supersedes it', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    const booted = hashTree(t.sysroot.treePath('0001'));
    const noMotd = { name: 'no-motd-edits', run: ({ delta }: { delta: readonly string[] }) => delta.filter((p) => p === 'etc/motd').map((p) => ({ code: 'MOTD', path: p, message: 'motd is managed elsewhere', severity: 'error' as const })) };
    const err = await t.sysroot.stage(motdUpdate('bad'), { validators: [noMotd] }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', isRejection: true, path: 'etc/motd' });
    const st = t.sysroot.status();
    expect(st.lastFailure).toMatchObject({ id: '0002', label: 'bad', phase: 'validate', code: 'VALIDATION_FAILED', issues: [{ code: 'MOTD', path: 'etc/motd', message: 'motd is managed elsewhere', severity: 'error' }] });
    expect(st.deployments.find((d) => d.id === '0002')).toMatchObject({ failed: true, status: 'failed' });
    expect(fs.readFileSync(path.join(t.sysroot.treePath('0002'), 'etc/motd'), 'utf8')).toBe('motd of bad\n');
    expect(st.staged).toBeNull();
    expect(hashTree(t.sysroot.treePath('0001'))).toBe(booted);

    const ok = await t.sysroot.stage(motdUpdate('good'), { validators: [() => [{ code: 'W', path: '', message: 'just saying', severity: 'warning' }]] });
    expect(ok.warnings).toEqual([{ code: 'W', path: '', message: 'just saying', severity: 'warning' }]);
    expect(t.sysroot.status()).toMatchObject({ staged: '0003', lastFailure: null });
    expect(ids(t.sysroot)).toEqual(['0001', '0003']);
  });

  it('a staged tree changed after staging fails finalize; current stays; the next boot reports it once', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await t.sysroot.stage(motdUpdate('A'));
    fs.writeFileSync(path.join(t.sysroot.treePath('0002'), 'etc/motd'), 'tampered\n');
    await expect(t.sysroot.finalize()).rejects.toMatchObject({ code: 'FINALIZE_FAILED' });
    expect(t.sysroot.status()).toMatchObject({ current: '0001', staged: null, lastFailure: { id: '0002', phase: 'finalize' } });
    expect((await t.sysroot.boot()).finalizeFailure).toMatchObject({ id: '0002', phase: 'finalize' });
    expect((await t.sysroot.boot()).finalizeFailure).toBeNull();
  });

  it('status has the documented shape: the fields and types of docs/status-json.md, for the status and each deployment', async () => {
    t = await tempSysroot({ tree: BASE_TREE });
    await t.sysroot.stage(motdUpdate('A'), { label: 'web-1' });
    const st = JSON.parse(JSON.stringify(t.sysroot.status())) as Record<string, unknown>;
    const [statusFields, deploymentFields] = documentedTables();
    // Every documented field is there with its documented type, and nothing undocumented.
    expect(Object.keys(st).sort()).toEqual(Object.keys(statusFields!).sort());
    for (const [k, type] of Object.entries(statusFields!)) expect({ field: k, ok: hasType(st[k], type) }).toEqual({ field: k, ok: true });
    const deployments = st.deployments as Record<string, unknown>[];
    expect(deployments.map((d) => d.id)).toEqual(['0002', '0001']); // newest first
    for (const d of deployments) {
      const optional = Object.entries(deploymentFields!).filter(([, type]) => type.includes('optional')).map(([k]) => k);
      expect(Object.keys(d).filter((k) => !(k in deploymentFields!))).toEqual([]);
      expect(Object.keys(deploymentFields!).filter((k) => !(k in d) && !optional.includes(k))).toEqual([]);
      for (const [k, type] of Object.entries(deploymentFields!)) if (k in d) expect({ id: d.id, field: k, ok: hasType(d[k], type) }).toEqual({ id: d.id, field: k, ok: true });
    }
    expect(st).toMatchObject({ booted: '0001', current: '0001', staged: '0002', rollback: null, pendingReboot: false, lastFailure: null });
    expect(deployments[0]).toMatchObject({ label: 'web-1', path: path.join(t.dir, 'deploy', '0002', 'tree'), staged: true });
  });

  it('a directory tree built with buildTree can be staged over by later updates', async () => {
    // Sanity of the helpers users rely on: tempSysroot + buildTree + reboot.
    t = await tempSysroot({ tree: { 'etc/a': 'a\n' } });
    const more = buildTree(path.join(t.scratch, 'more'), { 'x/y': 'z' });
    const layered = await t.sysroot.stage(more);
    expect(layered.delta).toEqual(['x', 'x/y']);
    let r = await reboot(t.sysroot);
    expect(r.boot.event).toMatchObject({ kind: 'booted', id: '0002' });
    // A later update over the tree the directory made: both stay, and the base too.
    await t.sysroot.stage({ files: [{ path: '/etc/b', contents: 'b\n' }] });
    r = await reboot(t.sysroot);
    expect(r.finalize).toMatchObject({ finalized: true, id: '0003' });
    expect(r.boot.event).toMatchObject({ kind: 'booted', id: '0003' });
    const current = (p: string) => fs.readFileSync(path.join(t!.dir, 'current', p), 'utf8');
    expect([current('etc/a'), current('x/y'), current('etc/b')]).toEqual(['a\n', 'z', 'b\n']);
  });
});
