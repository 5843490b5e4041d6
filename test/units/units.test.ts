import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa, execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadOnlyTree } from '../../src/fs/trees/read-only-tree.js';
import { verifySystemdUnits } from '../../src/validate/systemd-verify.js';

const UNITS_DIR = path.resolve(import.meta.dirname, '../../units');
const UNITS = ['stagedroot-boot.service', 'stagedroot-detach-usr.service', 'stagedroot-finalize.service', 'stagedroot-health.service'];
/** The units that run the CLI (the detach-usr unit runs umount only). */
const CLI_UNITS = UNITS.filter((u) => u !== 'stagedroot-detach-usr.service');

/** Debian's (and every systemd distribution's) journal flush unit, which the drop-in extends. */
const HOST_FLUSH = ['/usr/lib/systemd/system/systemd-journal-flush.service', '/lib/systemd/system/systemd-journal-flush.service'].find((p) => fs.existsSync(p)) ?? '/usr/lib/systemd/system/systemd-journal-flush.service';

const HAVE = ((): boolean => {
  try {
    execaSync('systemd-analyze', ['--version']);
    return true;
  } catch {
    return false;
  }
})();
if (!HAVE) {
  if (process.env.CI) throw new Error('systemd-analyze is required in CI (install systemd)');
  console.warn('SKIPPED the unit checks: systemd-analyze is not installed');
}

let tmp: string | undefined;
afterEach(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
});

/** A root with the shipped units installed, a stub /usr/bin/stagedroot and a stub /bin/umount. */
function installedTree(edit: (name: string, text: string) => string = (_n, s) => s): string {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-units-'));
  const unitDir = path.join(tmp, 'usr/lib/systemd/system');
  fs.mkdirSync(unitDir, { recursive: true });
  for (const u of UNITS) fs.writeFileSync(path.join(unitDir, u), edit(u, fs.readFileSync(path.join(UNITS_DIR, u), 'utf8')));
  fs.mkdirSync(path.join(tmp, 'usr/bin'), { recursive: true });
  fs.writeFileSync(path.join(tmp, 'usr/bin/stagedroot'), '#!/bin/sh\n', { mode: 0o755 });
  fs.mkdirSync(path.join(tmp, 'bin'), { recursive: true });
  fs.writeFileSync(path.join(tmp, 'bin/umount'), '#!/bin/sh\n', { mode: 0o755 });
  return tmp;
}

function directives(unit: string): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of fs.readFileSync(path.join(UNITS_DIR, unit), 'utf8').split('\n')) {
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (kv) m.set(kv[1]!, [...(m.get(kv[1]!) ?? []), kv[2]!]);
  }
  return m;
}

describe('the shipped systemd units', () => {
  it('are in the package (package.json "files")', () => {
    const pkg = JSON.parse(fs.readFileSync(path.resolve(UNITS_DIR, '../package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('units');
    expect(fs.readdirSync(UNITS_DIR).sort()).toEqual([...UNITS, 'systemd-journal-flush.service.d']);
    expect(fs.readdirSync(path.join(UNITS_DIR, 'systemd-journal-flush.service.d'))).toEqual(['stagedroot.conf']);
  });

  it('name no sysroot: the CLI finds it (what the initramfs recorded, else /etc/stagedroot/environment)', () => {
    for (const u of UNITS) {
      const d = directives(u);
      expect(d.get('Environment'), u).toBeUndefined();
      expect(d.get('EnvironmentFile'), u).toBeUndefined();
      // /sysroot is where the physical root is bound, a mount the finalize at shutdown needs, not the sysroot.
      expect(d.get('RequiresMountsFor'), u).toEqual(CLI_UNITS.includes(u) ? ['/sysroot'] : undefined);
    }
  });

  it('say what they must: finalize at shutdown (late, 5 min), boot early, health before boot-complete.target', () => {
    const fin = directives('stagedroot-finalize.service');
    expect(fin.get('Type')).toEqual(['oneshot']);
    expect(fin.get('RemainAfterExit')).toEqual(['yes']);
    expect(fin.get('ExecStop')).toEqual(['/usr/bin/stagedroot finalize']);
    expect(fin.get('ExecStart')).toBeUndefined();
    expect(fin.get('TimeoutStopSec')).toEqual(['5m']);
    expect(fin.get('Conflicts')).toEqual(['final.target']);
    expect(fin.get('Before')!.join(' ')).toContain('final.target');
    expect(fin.get('DefaultDependencies')).toEqual(['no']);
    const boot = directives('stagedroot-boot.service');
    expect(boot.get('ExecStart')).toEqual(['/usr/bin/stagedroot boot']);
    expect(boot.get('DefaultDependencies')).toEqual(['no']);
    expect(boot.get('Before')!.join(' ')).toContain('sysinit.target');
    const health = directives('stagedroot-health.service');
    expect(health.get('ExecStart')).toEqual(['/usr/bin/stagedroot health']);
    expect(health.get('Before')).toEqual(['boot-complete.target']);
    expect(health.get('RequiredBy')).toEqual(['boot-complete.target']);
    expect(health.get('After')!.join(' ')).toContain('stagedroot-boot.service');
  });

  it('detach the read-only /usr at the very end of the shutdown, only on a machine booted through stagedroot', () => {
    // systemd 252 built with split-usr (Debian 12) otherwise fails to unmount /usr in systemd-shutdown.
    const d = directives('stagedroot-detach-usr.service');
    expect(d.get('DefaultDependencies')).toEqual(['no']);
    expect(d.get('After')).toEqual(['umount.target']);
    expect(d.get('Before')).toEqual(['final.target']);
    expect(d.get('WantedBy')).toEqual(['final.target']);
    expect(d.get('Type')).toEqual(['oneshot']);
    expect(d.get('ExecStart')).toEqual(['/bin/umount --lazy /usr']);
    expect(d.get('ConditionPathExists')).toEqual(['/run/stagedroot/booted']);
    expect(d.get('ConditionPathIsMountPoint')).toEqual(['/usr']);
    expect(d.get('Conflicts')).toBeUndefined();
  });

  it.skipIf(!HAVE)('pass `systemd-analyze verify --root` cleanly when installed in a tree (no output at all)', async () => {
    const root = installedTree();
    const files = UNITS.map((u) => path.join(root, 'usr/lib/systemd/system', u));
    const r = await execa('systemd-analyze', ['verify', '--man=no', '--recursive-errors=no', `--root=${root}`, ...files], { all: true, reject: false, env: { SYSTEMD_LOG_COLOR: '0' } });
    expect(r.all).toBe('');
    expect(r.exitCode).toBe(0);
    expect(await verifySystemdUnits({ tree: root, staged: new ReadOnlyTree(root), id: 'x', label: 'x', manifest: '', delta: UNITS.map((u) => `usr/lib/systemd/system/${u}`) })).toEqual([]);
  });

  it('stop the journal flush with umount.target (its relinquish of /var runs before the shared /var, a mount with no unit file, is unmounted)', () => {
    const text = fs.readFileSync(path.join(UNITS_DIR, 'systemd-journal-flush.service.d/stagedroot.conf'), 'utf8');
    const lines = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    expect(lines).toEqual(['[Unit]', 'Conflicts=umount.target', 'Before=umount.target']);
  });

  it.skipIf(!HAVE || !fs.existsSync(HOST_FLUSH))('the journal flush drop-in loads cleanly over the host\'s own systemd-journal-flush.service', async () => {
    const root = installedTree();
    fs.copyFileSync(HOST_FLUSH, path.join(root, 'usr/lib/systemd/system/systemd-journal-flush.service'));
    fs.mkdirSync(path.join(root, 'etc/systemd/system/systemd-journal-flush.service.d'), { recursive: true });
    fs.copyFileSync(path.join(UNITS_DIR, 'systemd-journal-flush.service.d/stagedroot.conf'), path.join(root, 'etc/systemd/system/systemd-journal-flush.service.d/50-stagedroot.conf'));
    const r = await execa('systemd-analyze', ['verify', '--man=no', '--recursive-errors=no', `--root=${root}`, path.join(root, 'usr/lib/systemd/system/systemd-journal-flush.service')], { all: true, reject: false, env: { SYSTEMD_LOG_COLOR: '0' } });
    // journalctl is not in the tree; everything else must load.
    expect(r.all.split('\n').filter((l) => l !== '' && !/Command journalctl is not executable|journalctl.*No such file/.test(l))).toEqual([]);
  });

  it.skipIf(!HAVE)('pass `systemd-analyze verify` against the host\'s own unit set (real targets, dependencies resolved)', async () => {
    const r = await execa('systemd-analyze', ['verify', '--man=no', ...UNITS.map((u) => path.join(UNITS_DIR, u))], { all: true, reject: false, env: { SYSTEMD_LOG_COLOR: '0' } });
    // The only thing allowed: stagedroot itself is not installed on the test host.
    const rest = r.all.split('\n').filter((l) => l !== '' && !/^stagedroot-\w+\.service: Command \/usr\/bin\/stagedroot is not executable/.test(l));
    expect(rest).toEqual([]);
  });

  it.skipIf(!HAVE)('the check can fail: a broken copy is reported', async () => {
    const root = installedTree((name, text) => (name === 'stagedroot-finalize.service' ? text.replace('\nTimeoutStopSec=5m', '\nTimeoutStopSec=5m\nExecStopp=/usr/bin/true') : text));
    const issues = await verifySystemdUnits({ tree: root, staged: new ReadOnlyTree(root), id: 'x', label: 'x', manifest: '', delta: UNITS.map((u) => `usr/lib/systemd/system/${u}`) });
    expect(issues).toEqual([expect.objectContaining({ path: 'usr/lib/systemd/system/stagedroot-finalize.service', message: expect.stringContaining("Unknown key 'ExecStopp'") })]);
  });
});
