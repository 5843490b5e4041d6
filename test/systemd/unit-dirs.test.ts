import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { classifyUnitPath, findUnitFile, isMaskedIn, parseLinkDir, UNIT_SEARCH_PATH, unitDirsIn } from '../../src/systemd/unit-dirs.js';
import { buildTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let base: string | undefined;
let t: TempSysroot | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
  base = undefined;
  t?.cleanup();
  t = undefined;
});

const UNIT = '[Service]\nExecStart=/bin/true\n';

describe('the systemd unit module', () => {
  it('names the whole offline search path, etc/ first', () => {
    expect(UNIT_SEARCH_PATH).toEqual(['etc/systemd/system', 'usr/local/lib/systemd/system', 'usr/lib/systemd/system', 'lib/systemd/system']);
  });

  it('classifies unit files and drop-ins in every directory of the search path', () => {
    expect(classifyUnitPath('usr/local/lib/systemd/system/a.service')).toEqual({ kind: 'unit', dir: 'usr/local/lib/systemd/system', unit: 'a.service' });
    expect(classifyUnitPath('lib/systemd/system/getty@.service.d/x.conf')).toEqual({ kind: 'dropin', dir: 'lib/systemd/system', unit: 'getty@.service', name: 'x.conf' });
    expect(classifyUnitPath('etc/systemd/system/a.service.d/x.txt')).toBeNull();
    expect(classifyUnitPath('etc/systemd/system/README')).toBeNull();
    expect(classifyUnitPath('etc/systemd/user/a.service')).toBeNull();
    expect(parseLinkDir('multi-user.target.wants')).toEqual({ unit: 'multi-user.target', kind: 'wants' });
    expect(parseLinkDir('a.service.upholds')).toEqual({ unit: 'a.service', kind: 'upholds' });
    expect(parseLinkDir('a.service.d')).toBeNull();
  });

  it('finds unit files in search-path order, instances falling back to templates, one directory per real path', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-unitdirs-'));
    const dir = buildTree(path.join(base, 'tree'), {
      'usr/lib/systemd/system/a.service': UNIT,
      'usr/local/lib/systemd/system/a.service': UNIT,
      'usr/lib/systemd/system/getty@.service': UNIT,
      'etc/systemd/system/m.service': { symlink: '/dev/null' },
      lib: { symlink: 'usr/lib' },
    });
    const tree = new ReadOnlyTree(dir);
    expect(findUnitFile(tree, 'a.service')).toBe('usr/local/lib/systemd/system/a.service');
    expect(findUnitFile(tree, 'getty@tty1.service')).toBe('usr/lib/systemd/system/getty@.service');
    expect(findUnitFile(tree, 'nope.service')).toBeNull();
    expect(isMaskedIn(tree, 'm.service')).toBe(true);
    expect(isMaskedIn(tree, 'a.service')).toBe(false);
    // lib -> usr/lib: the same directory is listed once.
    expect(unitDirsIn(tree)).toEqual(['etc/systemd/system', 'usr/local/lib/systemd/system', 'usr/lib/systemd/system']);
    fs.rmSync(path.join(dir, 'usr/local'), { recursive: true });
    expect(unitDirsIn(tree)).toEqual(['etc/systemd/system', 'usr/lib/systemd/system']);
  });

  it('is what the validators use: a dangling link under usr/local/lib is found, a unit there counts as existing', async () => {
    t = await tempSysroot({ tree: { 'usr/local/lib/systemd/system/local.service': UNIT } });
    const err = await t.sysroot
      .stage({ symlinks: [{ path: '/usr/local/lib/systemd/system/multi-user.target.wants/gone.service', target: '../gone.service' }] })
      .then(() => null, (e: unknown) => e as { issues: { code: string; path: string; severity: string }[] });
    expect(err?.issues.map((i) => `${i.severity} ${i.code} ${i.path}`)).toEqual(['error DANGLING_UNIT_LINK usr/local/lib/systemd/system/multi-user.target.wants/gone.service']);
    const r = await t.sysroot.stage({ symlinks: [{ path: '/etc/systemd/system/multi-user.target.wants/local.service', target: '/etc/systemd/system/local.service' }] }, { builtins: { systemdVerify: false } });
    expect(r.warnings.map((w) => `${w.code} ${w.path}`)).toEqual(['DANGLING_UNIT_LINK etc/systemd/system/multi-user.target.wants/local.service']);
  });
});
