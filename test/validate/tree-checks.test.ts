import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { StagedrootError, type Issue } from '../../src/errors.js';
import { Sysroot } from '../../src/sysroot.js';
import { DEFAULT_SETUID_ALLOW_LIST, checkUnsafeModes } from '../../src/validate/unsafe-modes.js';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { readOnDisk } from '../../src/fs/manifests/patch-manifest.js';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

async function rejected(p: Promise<unknown>): Promise<Issue[]> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(StagedrootError);
  expect((err as StagedrootError).code).toBe('VALIDATION_FAILED');
  return (err as StagedrootError).issues;
}

const UNIT = '[Service]\nExecStart=/usr/bin/app\n';

describe('dangling *.wants / *.requires links', () => {
  it('rejects a link whose unit is nowhere in the tree, resolved inside the tree (not the host)', async () => {
    t = await tempSysroot({ tree: { 'usr/lib/systemd/system/real.service': UNIT } });
    const issues = await rejected(
      t.sysroot.stage({
        symlinks: [
          // /usr/lib/systemd/system/gone.service exists on no tree; /etc/passwd exists on the host, not in the tree.
          { path: '/etc/systemd/system/multi-user.target.wants/gone.service', target: '/usr/lib/systemd/system/gone.service' },
          { path: '/etc/systemd/system/multi-user.target.requires/passwd.service', target: '/etc/passwd' },
          { path: '/etc/systemd/system/multi-user.target.wants/real.service', target: '/usr/lib/systemd/system/real.service' },
        ],
      }),
    );
    expect(issues).toEqual([
      expect.objectContaining({ code: 'DANGLING_UNIT_LINK', severity: 'error', path: 'etc/systemd/system/multi-user.target.requires/passwd.service' }),
      expect.objectContaining({ code: 'DANGLING_UNIT_LINK', severity: 'error', path: 'etc/systemd/system/multi-user.target.wants/gone.service', message: expect.stringContaining('/usr/lib/systemd/system/gone.service does not exist in the tree') }),
    ]);
  });

  it('rejects the stale link left when an update removes the unit it points to', async () => {
    t = await tempSysroot({
      tree: { 'etc/systemd/system/app.service': UNIT, 'etc/systemd/system/multi-user.target.wants/app.service': { symlink: '../app.service' } },
    });
    const issues = await rejected(t.sysroot.stage({ remove: ['/etc/systemd/system/app.service'] }));
    expect(issues).toEqual([expect.objectContaining({ severity: 'error', path: 'etc/systemd/system/multi-user.target.wants/app.service' })]);
  });

  it('only warns when the unit exists under another path, or when the booted tree had the same dangling link', async () => {
    t = await tempSysroot({
      tree: {
        'usr/lib/systemd/system/app.service': UNIT,
        'etc/systemd/system/multi-user.target.wants/old.service': { symlink: '/usr/lib/systemd/system/old.service' },
      },
    });
    const r = await t.sysroot.stage({ symlinks: [{ path: '/etc/systemd/system/multi-user.target.wants/app.service', target: '/etc/systemd/system/app.service' }] });
    expect(r.warnings.map((w) => [w.code, w.path])).toEqual([
      ['DANGLING_UNIT_LINK', 'etc/systemd/system/multi-user.target.wants/app.service'],
      ['DANGLING_UNIT_LINK', 'etc/systemd/system/multi-user.target.wants/old.service'],
    ]);
  });

  it('can be switched off', async () => {
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ symlinks: [{ path: '/etc/systemd/system/x.target.wants/y.service', target: '/nowhere' }] }, { builtins: { wantsLinks: false } });
    expect(t.sysroot.status().staged).not.toBeNull();
  });
});

describe('unsafe modes', () => {
  it('rejects world-writable files and directories under etc/, not a sticky directory, not outside etc/', async () => {
    t = await tempSysroot({ tree: {} });
    const issues = await rejected(
      t.sysroot.stage({
        files: [
          { path: '/etc/app.conf', contents: 'x\n', mode: '0666' },
          { path: '/var/tmp/scratch', contents: 'x\n', mode: '0666' },
        ],
        directories: [
          { path: '/etc/drop', mode: '0777' },
          { path: '/etc/spool', mode: '1777' },
        ],
      }),
    );
    expect(issues.map((i) => [i.code, i.path])).toEqual([
      ['WORLD_WRITABLE', 'etc/app.conf'],
      ['WORLD_WRITABLE', 'etc/drop'],
    ]);
    expect(issues[0]!.message).toContain('mode 0666');
  });

  it('rejects set-uid and set-gid files outside the allow-list, accepts the allow-listed ones', async () => {
    t = await tempSysroot({ tree: {} });
    const issues = await rejected(
      t.sysroot.stage({
        files: [
          { path: '/usr/bin/sudo', contents: 'x', mode: '4755' },
          { path: '/usr/local/bin/rootme', contents: 'x', mode: '4755' },
          { path: '/usr/local/bin/grp', contents: 'x', mode: '2755' },
        ],
      }),
    );
    expect(issues.map((i) => [i.code, i.path, i.message.split(' (')[0]])).toEqual([
      ['SETUID_NOT_ALLOWED', 'usr/local/bin/grp', 'file is set-gid'],
      ['SETUID_NOT_ALLOWED', 'usr/local/bin/rootme', 'file is set-uid'],
    ]);
    const ok = await t.sysroot.stage(
      { files: [{ path: '/usr/local/bin/rootme', contents: 'x', mode: '4755' }] },
      { builtins: { unsafeModes: { setuidAllowList: [...DEFAULT_SETUID_ALLOW_LIST, 'usr/local/bin'] } } },
    );
    expect(t.sysroot.status().staged).toBe(ok.id);
  });

  it('says the same from the manifest step\'s entries of the delta as from an lstat of each path', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'unsafe-modes-'));
    try {
      const mk = (rel: string, mode: number, dir_ = false): void => {
        const host = path.join(dir, rel);
        fs.mkdirSync(path.dirname(host), { recursive: true });
        if (dir_) fs.mkdirSync(host);
        else fs.writeFileSync(host, 'x');
        fs.chmodSync(host, mode);
      };
      mk('etc/ww', 0o666);
      mk('etc/spool', 0o1777, true);
      mk('etc/open', 0o777, true);
      mk('usr/bin/sudo', 0o4755);
      mk('usr/local/bin/both', 0o6755);
      mk('usr/local/bin/plain', 0o755);
      fs.symlinkSync('/nowhere', path.join(dir, 'etc/link'));
      const delta = ['etc/link', 'etc/open', 'etc/spool', 'etc/ww', 'usr/bin/sudo', 'usr/local/bin/both', 'usr/local/bin/plain'];
      const ctx = { tree: dir, staged: new ReadOnlyTree(dir), id: '1', label: 'x', manifest: '', delta };
      const byLstat = checkUnsafeModes(ctx);
      const byEntries = checkUnsafeModes({ ...ctx, deltaEntries: delta.map((p) => readOnDisk(dir, p)!) });
      expect(byLstat.map((i) => [i.code, i.path])).toEqual([
        ['WORLD_WRITABLE', 'etc/open'],
        ['WORLD_WRITABLE', 'etc/ww'],
        ['SETUID_NOT_ALLOWED', 'usr/local/bin/both'],
      ]);
      expect(byEntries).toEqual(byLstat);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('can be switched off', async () => {
    t = await tempSysroot({ tree: {} });
    await t.sysroot.stage({ files: [{ path: '/etc/a', contents: 'x', mode: '0666' }] }, { builtins: { unsafeModes: false } });
    expect(t.sysroot.status().staged).not.toBeNull();
  });
});

describe('required paths', () => {
  it('by default keeps etc/os-release when the booted tree has it (through a symlink inside the tree)', async () => {
    t = await tempSysroot({ tree: { 'usr/lib/os-release': 'ID=test\n', 'etc/os-release': { symlink: '../usr/lib/os-release' } } });
    let issues = await rejected(t.sysroot.stage({ remove: ['/usr/lib/os-release'] }));
    expect(issues).toEqual([{ code: 'REQUIRED_PATH_MISSING', path: 'etc/os-release', message: 'required path /etc/os-release is missing from the staged tree: it is a symlink to /usr/lib/os-release, which does not exist', severity: 'error' }]);
    issues = await rejected(t.sysroot.stage({ remove: ['/etc/os-release'] }));
    expect(issues[0]!.message).toContain('it does not exist');
  });

  it('by default holds a tree that never had etc/os-release to nothing', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    await t.sysroot.stage({ remove: ['/etc/motd'] });
    expect(t.sysroot.status().staged).not.toBeNull();
  });

  it('takes a configured list (Sysroot-wide or per stage) and rejects a path that leaves the root', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const issues = await rejected(t.sysroot.stage({ files: [{ path: '/etc/a', contents: 'x' }] }, { builtins: { requiredPaths: ['/etc/machine-id', 'etc/motd'] } }));
    expect(issues.map((i) => i.path)).toEqual(['etc/machine-id']);
    const wide = await Sysroot.open(t.dir, { builtins: { requiredPaths: ['etc/issue'] } });
    expect((await rejected(wide.stage({ files: [{ path: '/etc/a', contents: 'x' }] }))).map((i) => i.path)).toEqual(['etc/issue']);
    await wide.stage({ files: [{ path: '/etc/a', contents: 'x' }] }, { builtins: { requiredPaths: false } });
    const err = await t.sysroot.stage({ files: [{ path: '/etc/a', contents: 'x' }] }, { builtins: { requiredPaths: ['../x'] } }).catch((e: StagedrootError) => e);
    expect(err).toMatchObject({ code: 'USAGE', option: 'builtins.requiredPaths' });
    expect(t.sysroot.status().lastFailure).toBeNull(); // a bad option is the caller's, not the update's: nothing recorded
    const unknown = await t.sysroot.stage({ files: [] }, { builtins: { systemdVerfy: false } as never }).catch((e: StagedrootError) => e);
    expect(unknown).toMatchObject({ code: 'USAGE', message: expect.stringContaining('Unknown built-in validator `builtins.systemdVerfy`') });
  });
});
