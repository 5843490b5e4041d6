import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { hashTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { minisignKey, minisignSign } from '../trust/minisign-keys.js';
import { umociImage } from '../sources/oci/oci-helpers.js';
import { hostPlatform } from '../../src/sources/oci/platform.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

const BASE = {
  'etc/os-release': 'ID=test\n',
  'etc/motd': 'hello\n',
  'etc/same.conf': 'same\n',
  'etc/old.conf': 'old\n',
  'srv/data/a': 'a\n',
  'srv/data/b': 'b\n',
  'srv/file': 'not a dir\n',
  'usr/bin/tool': 'tool\n',
};

function writeJson(s: TempSysroot, name: string, doc: unknown): string {
  const p = path.join(s.scratch, name);
  fs.writeFileSync(p, JSON.stringify(doc));
  return p;
}

/** The whole sysroot (every file, state included): a dry run must leave it byte for byte. */
const snapshot = (s: TempSysroot) => hashTree(s.dir);

describe('stage --dry-run', () => {
  it('prints what a stage would add, modify and remove, exactly what `diff` shows after the real stage; writes nothing', async () => {
    t = await tempSysroot({ tree: BASE });
    const spec = writeJson(t, 'u.json', {
      version: 1,
      files: [
        { path: '/etc/motd', contents: 'changed\n' },
        { path: '/etc/same.conf', contents: 'same\n' },
        { path: '/etc/new/app.conf', contents: 'new\n' },
      ],
      symlinks: [{ path: '/etc/link', target: 'motd' }],
      remove: ['/etc/old.conf', { path: '/srv/data', recursive: true }],
    });
    const before = snapshot(t);
    const dry = await cli(['stage', spec, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(dry.code, dry.err).toBe(0);
    expect(snapshot(t)).toBe(before);
    const plan = JSON.parse(dry.out);
    expect(plan.ok).toBe(true);
    expect(plan.issues).toEqual([]);

    const text = await cli(['stage', spec, '--dry-run', '--sysroot', t.dir]);
    expect(text.out).toContain('M etc/motd (content)');
    expect(text.out).toContain('A etc/new/app.conf');
    expect(text.out).toContain('D srv/data/a');
    expect(text.out).not.toContain('etc/same.conf');

    const staged = await t.sysroot.stage(spec);
    const real = (await t.sysroot.diff(t.sysroot.status().booted!, staged.id)).filter((c) => c.change !== 'modified' || c.what?.some((w) => w !== 'mtime'));
    const paths = (cs: { path: string; change: string }[]) => cs.map((c) => `${c.change} ${c.path}`);
    // directories whose mtime changed are the only difference a dry run does not predict
    expect(paths(plan.changes)).toEqual(paths(real.filter((c) => !(c.change === 'modified' && fs.statSync(path.join(staged.path, c.path)).isDirectory()))));
  });

  it('finds the conflicts a stage would hit and exits 3, recording nothing', async () => {
    t = await tempSysroot({ tree: BASE });
    const spec = writeJson(t, 'bad.json', {
      version: 1,
      files: [
        { path: '/etc/motd', contents: 'x\n', overwrite: false },
        { path: '/srv/file/below', contents: 'x\n' },
      ],
    });
    const before = snapshot(t);
    const r = await cli(['stage', spec, '--dry-run', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    // the first conflict stops the stage, as it stops the real one
    expect(r.out).toContain('APPLY_FAILED at etc/motd');
    expect(r.out).toContain('EEXIST');
    expect(r.out).toContain('would be rejected');
    expect(snapshot(t)).toBe(before);
    expect(t.sysroot.status().lastFailure).toBeNull();
    // and the real stage agrees
    expect((await cli(['stage', spec, '--sysroot', t.dir])).code).toBe(3);
    expect(t.sysroot.status().lastFailure?.path).toBe('etc/motd');

    const next = writeJson(t, 'bad2.json', { version: 1, files: [{ path: '/srv/file/below', contents: 'x\n' }] });
    const r2 = await cli(['stage', next, '--dry-run', '--sysroot', t.dir]);
    expect(r2.code).toBe(3);
    expect(r2.out).toContain('ENOTDIR');
  });

  it('rejects what the source itself rejects: a bad spec, a hostile layer, a missing signature', async () => {
    t = await tempSysroot({ tree: BASE });
    const bad = writeJson(t, 'schema.json', { version: 1, files: [{ path: '/etc/x', contents: 1 }], bogus: true });
    let r = await cli(['stage', bad, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.out).issues.length).toBeGreaterThan(0);

    const d = path.join(t.scratch, 'evil');
    fs.mkdirSync(d);
    fs.writeFileSync(path.join(d, 'x'), 'x');
    const tar = path.join(t.scratch, 'evil.tar');
    await execa('tar', ['-C', d, '-cf', tar, '-P', '--transform', 's,^,../../,', 'x']);
    r = await cli(['stage', tar, '--dry-run', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.out).toContain('PATH_ESCAPE');

    const k = await minisignKey(t.scratch, 'k');
    await t.sysroot.addTrustedKey(k.pub);
    const before = snapshot(t);
    const good = writeJson(t, 'good.json', { version: 1, files: [{ path: '/etc/a', contents: 'a\n' }] });
    r = await cli(['stage', good, '--dry-run', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.out).toContain('SIGNATURE_INVALID');
    await minisignSign(k.key, good);
    r = await cli(['stage', good, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(r.code, r.out).toBe(0);
    expect(JSON.parse(r.out).signature.keyId).toBe(k.id);
    expect(snapshot(t)).toBe(before);
  });

  it('an image: the whole-root change against the booted tree', async () => {
    // with the shared /var: the dry run lists the tree's changes as the real stage makes them
    t = await tempSysroot({ tree: BASE });
    const layout = path.join(t.scratch, 'img');
    await umociImage(t.scratch, layout, 'latest', [{ add: { 'etc/os-release': 'ID=test\n', 'etc/motd': 'image\n', 'opt/new': 'n\n' } }], { arch: hostPlatform().architecture });
    const r = await cli(['stage', layout, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(r.code, r.out).toBe(0);
    const changes = JSON.parse(r.out).changes.map((c: { change: string; path: string }) => `${c.change} ${c.path}`);
    expect(changes).toContain('modified etc/motd');
    expect(changes).toContain('added opt/new');
    expect(changes).toContain('removed usr/bin/tool');
    expect(changes).not.toContain('modified etc/os-release');
    expect(changes.some((c: string) => c.endsWith('oci-layout') || c.includes('blobs'))).toBe(false);
    // the real stage changes the same paths (less directories whose attributes only the tree shows)
    const staged = await t.sysroot.stage(layout);
    const real = (await t.sysroot.diff(t.sysroot.status().booted!, staged.id))
      .filter((c) => !(c.change === 'modified' && fs.statSync(path.join(staged.path, c.path)).isDirectory()))
      .map((c) => `${c.change} ${c.path}`);
    expect(changes.filter((c: string) => !c.startsWith('modified') || !fs.statSync(path.join(staged.path, c.slice(9))).isDirectory())).toEqual(real);
  });
});

describe('stage --dry-run agrees with the real stage (one planner)', () => {
  const UNITS = {
    'etc/os-release': 'ID=test\n',
    'usr/lib/systemd/system/vendor.service': '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\nAlias=vendor-alias.service\n',
    'etc/systemd/system/old.service': '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=old.target\n',
    'etc/systemd/system/old.target.wants/old.service': { symlink: '/etc/systemd/system/old.service' },
  } as const;
  const ign = (body: Record<string, unknown>) => ({ ignition: { version: '3.2.0' }, ...body });
  const lines = (cs: { path: string; change: string }[]) => cs.map((c) => `${c.change} ${c.path}`);

  it('lists the unit enablement links a stage creates and removes; the --json delta has the removed link', async () => {
    t = await tempSysroot({ tree: UNITS });
    const cfg = writeJson(t, 'units.ign', ign({ systemd: { units: [{ name: 'vendor.service', enabled: true }, { name: 'old.service', enabled: false }] } }));
    const dry = await cli(['stage', cfg, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(dry.code, dry.err).toBe(0);
    const planned = lines(JSON.parse(dry.out).changes);
    expect(planned).toEqual(expect.arrayContaining([
      'added etc/systemd/system/multi-user.target.wants/vendor.service',
      'added etc/systemd/system/vendor-alias.service',
      'removed etc/systemd/system/old.target.wants/old.service',
    ]));
    const real = await cli(['stage', cfg, '--json', '--sysroot', t.dir]);
    expect(real.code, real.err).toBe(0);
    const staged = JSON.parse(real.out);
    expect(staged.delta).toContain('etc/systemd/system/old.target.wants/old.service');
    expect(staged.delta).toContain('etc/systemd/system/multi-user.target.wants/vendor.service');
    const diff = await t.sysroot.diff(t.sysroot.status().booted!, staged.id);
    expect(planned).toEqual(lines(diff));
  });

  it('rejects a file over an existing directory and a directory over a file as the stage does (same code, exit 3)', async () => {
    t = await tempSysroot({ tree: BASE });
    const cases = [
      { files: [{ path: '/srv/data', contents: 'x\n' }] },
      { directories: [{ path: '/srv/file' }] },
    ];
    for (const [i, c] of cases.entries()) {
      const spec = writeJson(t, `over-${i}.json`, { version: 1, ...c });
      const dry = await cli(['stage', spec, '--dry-run', '--json', '--sysroot', t.dir]);
      const real = await cli(['stage', spec, '--json', '--sysroot', t.dir]);
      expect(real.code, real.out).toBe(3);
      expect(dry.code, dry.out).toBe(3);
      const failure = t.sysroot.status().lastFailure!;
      const plan = JSON.parse(dry.out);
      expect(plan.ok).toBe(false);
      expect(plan.issues.map((x: { code: string; path: string }) => `${x.code} ${x.path}`)).toContain(`${failure.code} ${failure.path}`);
      expect(plan.issues[0].message).toBe(failure.reason);
    }
  });

  it('prints the warnings the stage prints (unknown keys, a unit missing from the tree)', async () => {
    t = await tempSysroot({ tree: UNITS });
    const cfg = writeJson(t, 'warn.ign', ign({ storage: { files: [{ path: '/etc/a.conf', contents: { source: 'data:,a' }, bogus: 1 }] }, systemd: { units: [{ name: 'nope.service', enabled: true }] } }));
    const dry = await cli(['stage', cfg, '--dry-run', '--sysroot', t.dir]);
    expect(dry.code, dry.out).toBe(0);
    const real = await cli(['stage', cfg, '--sysroot', t.dir]);
    expect(real.code, real.err).toBe(0);
    const warnings = (s: string) => s.split('\n').filter((l) => l.startsWith('stagedroot: warning:'));
    expect(warnings(real.err).length).toBe(2);
    expect(warnings(dry.err)).toEqual(warnings(real.err));
  });
});

describe('stage --dry-run over names that are not UTF-8', () => {
  it('lists everything below a removed directory with latin-1 names, as `diff` does after the real stage', async () => {
    const latin1 = Buffer.from('caf\xe9', 'latin1');
    const esc = 'caf\udce9'; // the name's byte escaped, as tree paths carry it
    const src = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-dry-latin1-'));
    try {
      for (const [p, c] of Object.entries(BASE)) {
        fs.mkdirSync(path.dirname(path.join(src, p)), { recursive: true });
        fs.writeFileSync(path.join(src, p), c);
      }
      const dir = Buffer.concat([Buffer.from(`${src}/srv/data/`), latin1]);
      fs.mkdirSync(dir);
      fs.writeFileSync(Buffer.concat([dir, Buffer.from('/'), latin1]), 'x\n');
      t = await tempSysroot({ fromDirectory: src });
    } finally {
      fs.rmSync(src, { recursive: true, force: true });
    }
    const spec = writeJson(t, 'rm.json', { version: 1, remove: [{ path: '/srv/data', recursive: true }] });
    const before = snapshot(t);
    const plan = await t.sysroot.dryRun(spec);
    expect(snapshot(t)).toBe(before);
    const listed = (cs: { path: string; change: string }[]): string[] => cs.map((c) => `${c.change} ${c.path}`);
    expect(listed(plan.changes)).toEqual(['removed srv/data', 'removed srv/data/a', 'removed srv/data/b', `removed srv/data/${esc}`, `removed srv/data/${esc}/${esc}`]);
    const staged = await t.sysroot.stage(spec);
    expect(listed(await t.sysroot.diff(t.sysroot.status().booted!, staged.id))).toEqual(listed(plan.changes));
  });
});
