import * as fs from 'node:fs';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { hashTree, reboot } from '../../../src/testing/index.js';
import { b64, config, gz, ignitionEnv, issuePaths, pct, sha, stageOk, stageRejected, type Env } from './ignition-helpers.js';

let env: Env;
afterEach(() => env?.cleanup());

const files = (...f: Record<string, unknown>[]) => config({ storage: { files: f } });
const unitCfg = (...u: Record<string, unknown>[]) => config({ systemd: { units: u } });

describe('Ignition fields stagedroot does not apply', () => {
  it('lists every unsupported field path before writing anything (unknown keys are not among them)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, {
      ignition: { version: '3.3.0', config: { merge: [{ source: 'https://example.com/a.ign' }] }, timeouts: { httpTotal: 5 } },
      storage: {
        disks: [{ device: '/dev/sda', wipeTable: true }],
        raid: [{ name: 'md0', level: 'raid1', devices: ['/dev/sdb', '/dev/sdc'] }],
        filesystems: [{ device: '/dev/sda1', format: 'ext4' }],
        luks: [{ name: 'root', device: '/dev/sda2' }],
        files: [
          { path: '/etc/ok', contents: { source: pct('fine') } },
          { path: '/etc/remote', contents: { source: 'https://example.com/f', httpHeaders: [{ name: 'A', value: 'b' }] } },
          { path: '/etc/tftp', contents: { source: 'tftp://10.0.0.1/f' }, append: [{ source: 's3://bucket/key' }] },
          { path: '/etc/typo', contnets: { source: pct('x') } },
        ],
        fiels: [{ path: '/etc/x' }],
      },
      passwd: { users: [{ name: 'core', passwordHash: '$6$x', groups: ['wheel'] }], groups: [{ name: 'g' }] },
      systemd: { units: [{ name: 'a.service', enabled: true }] },
    });
    expect(e.code).toBe('SOURCE_UNSUPPORTED');
    expect(issuePaths(e).sort()).toEqual([
      'ignition.config',
      'ignition.timeouts',
      'passwd.groups',
      'passwd.users[0].groups',
      'passwd.users[0].passwordHash',
      'storage.disks',
      'storage.files[1].contents.httpHeaders',
      'storage.files[1].contents.source',
      'storage.files[2].append[0].source',
      'storage.files[2].contents.source',
      'storage.filesystems',
      'storage.luks',
      'storage.raid',
    ]);
    expect(e.message).toContain('storage.files[1].contents.source: a remote source (https:)');
  });

  it('refuses versions other than 3.0.0–3.6.0', async () => {
    env = await ignitionEnv();
    for (const [version, code] of [['2.2.0', 'SOURCE_UNSUPPORTED'], ['3.6.0-experimental', 'SOURCE_UNSUPPORTED'], ['3.7.0-experimental', 'SOURCE_UNSUPPORTED'], ['3.7.0', 'SOURCE_UNSUPPORTED'], ['three', 'SPEC_INVALID']] as const) {
      const e = await stageRejected(env, { ignition: { version } });
      expect(e.code).toBe(code);
      expect(e.path).toBe('ignition.version');
    }
    const e = await stageRejected(env, { storage: {} });
    expect([e.code, e.path]).toEqual(['SPEC_INVALID', 'ignition.version']);
  });
});

describe('malformed Ignition configs', () => {
  it('lists every bad field with its path (SPEC_INVALID)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, config({
      storage: {
        files: [
          { path: 'etc/relative', contents: { source: pct('x') } },
          { path: '/etc/mode', mode: '0644' },
          { path: '/etc/neg', mode: -1 },
          { path: '/etc/hash', contents: { source: pct('x'), verification: { hash: 'md5-abc' } } },
          { path: '/etc/owner', user: { id: 1, name: 'core' } },
          { path: '/etc/comp', contents: { source: pct('x'), compression: 'xz' } },
          { path: '/etc/ow', overwrite: true },
          { path: '/etc/dup' },
        ],
        directories: [{ path: '/etc/dup' }],
        links: [{ path: '/etc/l', target: 'relative', hard: true }],
      },
      systemd: { units: [{ name: 'noextension', enabled: true }, { name: 'x.service', dropins: [{ name: 'a.txt', contents: 'x' }] }, { name: 'm.service', mask: true, enabled: true }] },
      passwd: { users: [{ name: 'core', sshAuthorizedKeys: ['k1', 'k1'] }] },
    }));
    expect(e.code).toBe('SPEC_INVALID');
    expect(issuePaths(e)).toEqual(expect.arrayContaining([
      'storage.files[0].path',
      'storage.files[1].mode',
      'storage.files[2].mode',
      'storage.files[3].contents.verification.hash',
      'storage.files[4].user',
      'storage.files[5].contents.compression',
      'storage.files[6].contents.source',
      'storage.links[0].target',
      'systemd.units[0].name',
      'systemd.units[1].dropins[0].name',
      'systemd.units[2].enabled',
    ]));
  });

  it('reports duplicates and sha256 under spec 3.0.0', async () => {
    env = await ignitionEnv();
    const dup = await stageRejected(env, config({
      storage: { files: [{ path: '/etc/a' }], directories: [{ path: '/etc/a/' }] },
      systemd: { units: [{ name: 'a.service' }, { name: 'a.service' }] },
      passwd: { users: [{ name: 'core', sshAuthorizedKeys: ['k', 'k'] }] },
    }));
    expect(issuePaths(dup)).toEqual(['storage.directories[0].path', 'systemd.units[1].name', 'passwd.users[0].sshAuthorizedKeys[1]']);
    const v30 = await stageRejected(env, config({ storage: { files: [{ path: '/etc/a', contents: { source: pct('a'), verification: { hash: sha('sha256', 'a') } } }] } }, '3.0.0'));
    expect([v30.code, v30.path]).toEqual(['SPEC_INVALID', 'storage.files[0].contents.verification.hash']);
  });

  it('names an unknown user or group name, resolved in the tree (SPEC_INVALID)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, files({ path: '/etc/a', contents: { source: pct('a') }, user: { name: 'nobody-here' }, group: { name: 'nogroup-here' } }));
    expect(e.code).toBe('SPEC_INVALID');
    expect(issuePaths(e)).toEqual(['storage.files[0].user.name', 'storage.files[0].group.name']);
  });
});

describe('hostile Ignition input', () => {
  it('rejects ".." paths (PATH_ESCAPE) and relative paths, naming the entry', async () => {
    env = await ignitionEnv();
    for (const p of ['/../../etc/shadow', '/etc/../../../tmp/x', '/a/./../../b']) {
      const e = await stageRejected(env, files({ path: '/etc/fine', contents: { source: pct('ok') } }, { path: p, contents: { source: pct('x') } }));
      expect([e.code, e.path]).toEqual(['PATH_ESCAPE', 'storage.files[1].path']);
    }
    const d = await stageRejected(env, config({ storage: { directories: [{ path: '../outside' }] } }));
    expect([d.code, d.path]).toEqual(['SPEC_INVALID', 'storage.directories[0].path']);
    const l = await stageRejected(env, config({ storage: { links: [{ path: '/etc/h', target: '/../../etc/passwd', hard: true }] } }));
    expect([l.code, l.path]).toEqual(['PATH_ESCAPE', 'storage.links[0].target']);
  });

  it('rejects unit and drop-in names with "/" or ".."', async () => {
    env = await ignitionEnv();
    for (const name of ['../../../etc/evil.service', 'a/b.service', '..service', 'x..y.service', 'evil\\x2f.service']) {
      const e = await stageRejected(env, unitCfg({ name, contents: '[Service]\n' }));
      expect([e.code, e.path]).toEqual(['SPEC_INVALID', 'systemd.units[0].name']);
    }
    for (const name of ['../../x.conf', 'a/b.conf', '..conf']) {
      const e = await stageRejected(env, unitCfg({ name: 'ok.service', dropins: [{ name, contents: '[Unit]\n' }] }));
      expect([e.code, e.path]).toEqual(['SPEC_INVALID', 'systemd.units[0].dropins[0].name']);
    }
  });

  it('rejects malformed data: URLs (SOURCE_CORRUPT), naming the entry', async () => {
    env = await ignitionEnv();
    const bad = ['data:text/plain;base64,@@@@', 'data:;base64,YWJj=', 'data:,%zz', 'data:,100%', 'data:nocomma', 'data:text;charset=utf-8,x', 'data:text/plain;;base64,YQ==', 'data:base64,YQ=='];
    for (const source of bad) {
      const e = await stageRejected(env, files({ path: '/etc/fine', contents: { source: pct('ok') } }, { path: '/etc/bad', contents: { source } }));
      expect([e.code, e.path], source).toEqual(['SOURCE_CORRUPT', 'storage.files[1].contents.source']);
      expect(e.message).toContain('/etc/bad');
    }
  });

  it('rejects a hash that does not match (SOURCE_CORRUPT), for contents and appends', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, files({ path: '/etc/a', contents: { source: pct('tampered'), verification: { hash: sha('sha512', 'original') } } }));
    expect([e.code, e.path]).toEqual(['SOURCE_CORRUPT', 'storage.files[0].contents.verification.hash']);
    // The hash is of the decompressed contents: the hash of the gzip bytes is a mismatch.
    const gzBytes = gzipSync(Buffer.from('x'));
    const g = await stageRejected(env, files({ path: '/etc/g', contents: { source: b64(gzBytes), compression: 'gzip', verification: { hash: sha('sha256', gzBytes) } } }));
    expect(g.path).toBe('storage.files[0].contents.verification.hash');
    const a = await stageRejected(env, files({ path: '/etc/b', append: [{ source: pct('ok') }, { source: pct('no'), verification: { hash: sha('sha256', 'yes') } }] }));
    expect(a.path).toBe('storage.files[0].append[1].verification.hash');
  });

  it('rejects corrupt gzip (SOURCE_CORRUPT) and a gzip bomb (UNSAFE_ENTRY) without inflating it whole', async () => {
    env = await ignitionEnv();
    const c = await stageRejected(env, files({ path: '/etc/c', contents: { source: b64('not gzip at all'), compression: 'gzip' } }));
    expect([c.code, c.path]).toEqual(['SOURCE_CORRUPT', 'storage.files[0].contents.source']);
    const bomb = gzipSync(Buffer.alloc(16 * 1024 * 1024)); // 16 MiB of zeros in ~16 KiB
    const b = await stageRejected(env, files({ path: '/etc/bomb', contents: { source: b64(bomb), compression: 'gzip' } }), { maxDecodedBytes: 1024 * 1024 });
    expect([b.code, b.path]).toEqual(['UNSAFE_ENTRY', 'storage.files[0].contents.source']);
    // The budget is shared: two files each under it, together over it.
    const half = b64(Buffer.alloc(600 * 1024));
    const t = await stageRejected(env, files({ path: '/etc/1', contents: { source: half } }, { path: '/etc/2', contents: { source: half } }), { maxDecodedBytes: 1024 * 1024 });
    expect([t.code, t.path]).toEqual(['UNSAFE_ENTRY', 'storage.files[1].contents.source']);
  });

  it('rejects overwrite: false (the default) over an existing path, naming the entry (APPLY_FAILED)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, files({ path: '/etc/existing.conf', contents: { source: pct('new') } }));
    expect([e.code, e.path]).toEqual(['APPLY_FAILED', 'storage.files[0].path']);
    const x = await stageRejected(env, files({ path: '/etc/existing.conf', overwrite: false, contents: { source: pct('new') } }));
    expect(x.path).toBe('storage.files[0].path');
    const d = await stageRejected(env, config({ storage: { directories: [{ path: '/etc/notadir' }] } }));
    expect([d.code, d.path]).toEqual(['APPLY_FAILED', 'storage.directories[0].path']);
    const l = await stageRejected(env, config({ storage: { links: [{ path: '/etc/existing.conf', target: '/x' }] } }));
    expect([l.code, l.path]).toEqual(['APPLY_FAILED', 'storage.links[0].path']);
  });

  it('rejects a file whose parent path is a regular file (ENOTDIR)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, files({ path: '/etc/notadir/child', contents: { source: pct('x') } }));
    expect(e.code).toBe('APPLY_FAILED');
    expect(e.errno).toBe('ENOTDIR');
    expect(e.path).toBe('etc/notadir/child');
  });

  it('rejects units that cannot be enabled, naming the unit: masked, hostile [Install] names', async () => {
    env = await ignitionEnv();
    const masked = await stageRejected(env, unitCfg({ name: 'masked.service', enabled: true }));
    expect(masked.message).toContain('masked');
    for (const install of ['WantedBy=../../../../etc/evil.target', 'Alias=../evil.service', 'Alias=other.socket', 'WantedBy=%H.target', 'Also=a/b.service']) {
      const e = await stageRejected(env, unitCfg({ name: 'ok.service', enabled: true, contents: `[Service]\nExecStart=/bin/true\n[Install]\n${install}\n` }));
      expect([e.code, e.path], install).toEqual(['APPLY_FAILED', 'systemd.units[0]']);
    }
    const tmpl = await stageRejected(env, unitCfg({ name: 't@.service', enabled: true, contents: '[Install]\nWantedBy=multi-user.target\n' }));
    expect(tmpl.message).toContain('DefaultInstance');
  });

  it('rejects SSH keys for a user the tree does not have (SOURCE_UNSUPPORTED: no user creation)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, config({ passwd: { users: [{ name: 'mallory', sshAuthorizedKeys: ['ssh-ed25519 AAAA m'] }] } }));
    expect([e.code, e.path]).toEqual(['SOURCE_UNSUPPORTED', 'passwd.users[0].name']);
  });

  it('keeps writes through links a config made pointing out of the root inside the tree', async () => {
    env = await ignitionEnv();
    // Links to the canary's host path (absolute, and by climbing ".."), booted; then files through them.
    await stageOk(env, config({ storage: { links: [{ path: '/etc/evil', target: env.canary }, { path: '/etc/up', target: '../../../../../../..' + env.scratch }] } }));
    await reboot(env.sysroot);
    const booted = env.sysroot.treePath(env.sysroot.status().booted!);
    expect(fs.readlinkSync(path.join(booted, 'etc/evil'))).toBe(env.canary);
    const canaryBefore = hashTree(env.canary);
    const r = await env.sysroot.stage(config({ storage: { files: [{ path: '/etc/evil/pwned', contents: { source: pct('pwned') } }, { path: '/etc/up/pwned2', contents: { source: pct('pwned') } }] } }));
    expect(hashTree(env.canary)).toBe(canaryBefore);
    expect(fs.existsSync(path.join(env.scratch, 'pwned2'))).toBe(false);
    expect(fs.readFileSync(path.join(r.path, env.canary, 'pwned'), 'utf8')).toBe('pwned');
    expect(fs.readFileSync(path.join(r.path, env.scratch, 'pwned2'), 'utf8')).toBe('pwned');
  });

  it('keeps writes through the base tree\'s own outward links (etc/ssl -> /etc/pki) inside the tree', async () => {
    env = await ignitionEnv({
      'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n',
      'etc/ssl': { symlink: '/etc/pki' },
      'etc/pki': { dir: true },
      'escape': { symlink: '/../../../../../..' },
    });
    const tree = await stageOk(env, files({ path: '/etc/ssl/cert.pem', contents: { source: pct('cert') } }, { path: '/escape/tmp/stagedroot-ign-escape-probe', contents: { source: gz('in tree'), compression: 'gzip' } }));
    expect(fs.readFileSync(path.join(tree, 'etc/pki/cert.pem'), 'utf8')).toBe('cert');
    expect(fs.readFileSync(path.join(tree, 'tmp/stagedroot-ign-escape-probe'), 'utf8')).toBe('in tree');
    expect(fs.existsSync('/tmp/stagedroot-ign-escape-probe')).toBe(false);
  });

  it('looks units up through the base tree\'s own outward links (lib/systemd/system -> /) inside the tree', async () => {
    env = await ignitionEnv({
      'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n',
      'lib/systemd': { dir: true },
      'lib/systemd/system': { symlink: '/' },
      'rootunit.service': '[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n',
    });
    const tree = await stageOk(env, config({ systemd: { units: [{ name: 'rootunit.service', enabled: true }] } }));
    expect(fs.readlinkSync(path.join(tree, 'etc/systemd/system/multi-user.target.wants/rootunit.service'))).toBe('/lib/systemd/system/rootunit.service');
  });

  it('rejects writes through a base tree\'s etc -> /etc (a loop inside the root: ELOOP), changing nothing', async () => {
    env = await ignitionEnv({ etc: { symlink: '/etc' }, 'srv/x': 'x\n' });
    const e = await stageRejected(env, files({ path: '/etc/motd', contents: { source: pct('hi') } }));
    expect([e.code, e.path]).toEqual(['APPLY_FAILED', 'storage.files[0].path']);
    expect(e.message).toContain('Too many levels of symbolic links resolving etc/motd');
  });
});
