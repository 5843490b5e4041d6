import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ignitionSource } from '../../../src/sources/ignition/index.js';
import { Sysroot } from '../../../src/sysroot.js';
import { DEFAULT_SETUID_ALLOW_LIST } from '../../../src/validate/unsafe-modes.js';
import { cli } from '../../helpers/cli.js';
import { config, ignitionEnv, pct, stageRejected, type Env } from './ignition-helpers.js';

/**
 * What real Ignition configs expect (found by running configs written by Ignition's
 * authors against Ignition's own code): each case here was once refused or mishandled.
 */
let env: Env;
afterEach(() => env?.cleanup());

const read = (tree: string, p: string) => fs.readFileSync(path.join(tree, p), 'utf8');
const mode = (tree: string, p: string) => fs.lstatSync(path.join(tree, p)).mode & 0o7777;
const stage = async (doc: Record<string, unknown>) => env.sysroot.stage(ignitionSource(doc));
const codesAt = (ws: readonly { code: string; path: string }[]) => ws.map((w) => `${w.code} ${w.path}`);

describe('empty contents.source (an empty file)', () => {
  it('writes an empty file, and with overwrite: true empties a file or replaces a symlink', async () => {
    env = await ignitionEnv({ 'etc/full.conf': 'full\n', 'etc/link.conf': { symlink: 'full.conf' } });
    const r = await stage(config({
      storage: {
        files: [
          { path: '/etc/new-empty', contents: { source: '' }, mode: 0o600 },
          { path: '/etc/full.conf', overwrite: true, contents: { source: '' } },
          { path: '/etc/link.conf', overwrite: true, contents: { source: '', compression: '' } },
        ],
      },
    }));
    expect(read(r.path, 'etc/new-empty')).toBe('');
    expect(mode(r.path, 'etc/new-empty')).toBe(0o600);
    expect(read(r.path, 'etc/full.conf')).toBe('');
    expect(fs.lstatSync(path.join(r.path, 'etc/link.conf')).isFile()).toBe(true);
    expect(read(r.path, 'etc/link.conf')).toBe('');
    expect(r.delta).toEqual(expect.arrayContaining(['etc/new-empty', 'etc/full.conf', 'etc/link.conf']));
    expect(r.warnings).toEqual([]);
  });

  it('is still a source: over an existing file without overwrite it is refused, as Ignition does', async () => {
    env = await ignitionEnv({ 'etc/full.conf': 'full\n' });
    const e = await stageRejected(env, config({ storage: { files: [{ path: '/etc/full.conf', contents: { source: '' } }] } }));
    expect([e.code, e.path]).toEqual(['APPLY_FAILED', 'storage.files[0].path']);
  });
});

describe('drop-ins with empty contents', () => {
  it('writes an empty drop-in (masking a vendor drop-in of the same name) and counts it', async () => {
    env = await ignitionEnv({
      'usr/lib/systemd/system/vendor.service': '[Service]\nExecStart=/bin/true\n',
      'usr/lib/systemd/system/vendor.service.d/10-vendor.conf': '[Service]\nEnvironment=VENDOR=1\n',
    });
    const r = await stage(config({ systemd: { units: [{ name: 'vendor.service', dropins: [{ name: '10-vendor.conf', contents: '' }] }] } }));
    expect(read(r.path, 'etc/systemd/system/vendor.service.d/10-vendor.conf')).toBe('');
    expect(r.delta).toContain('etc/systemd/system/vendor.service.d/10-vendor.conf');
    expect(env.sysroot.status().deployments.find((d) => d.id === r.id)?.source).toMatch(/1 unit, 1 drop-in/);
  });

  it('says so when a drop-in has no contents at all (not written, never dropped silently)', async () => {
    env = await ignitionEnv();
    const r = await stage(config({ systemd: { units: [{ name: 'vendor.service', dropins: [{ name: 'x.conf' }, { name: 'y.conf', contents: '[Unit]\n' }] }] } }));
    expect(fs.existsSync(path.join(r.path, 'etc/systemd/system/vendor.service.d/x.conf'))).toBe(false);
    expect(read(r.path, 'etc/systemd/system/vendor.service.d/y.conf')).toBe('[Unit]\n');
    expect(codesAt(r.warnings)).toEqual(['DROPIN_NOT_WRITTEN systemd.units[0].dropins[0].contents']);
  });

  it('refuses a storage file at the path of an empty drop-in (both write it)', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, config({
      storage: { files: [{ path: '/etc/systemd/system/a.service.d/x.conf', contents: { source: pct('x') } }] },
      systemd: { units: [{ name: 'a.service', dropins: [{ name: 'x.conf', contents: '' }] }] },
    }));
    expect([e.code, e.path]).toEqual(['SPEC_INVALID', 'systemd.units[0].dropins[0].name']);
  });
});

describe('enabling a unit the tree does not have', () => {
  it('stages with a warning in the result (Ignition writes a preset systemd ignores), and enables the rest', async () => {
    env = await ignitionEnv();
    const r = await stage(config({ systemd: { units: [{ name: 'nope.service', enabled: true }, { name: 'vendor.service', enabled: true }] } }));
    expect(codesAt(r.warnings)).toEqual(['UNIT_NOT_FOUND systemd.units[0]']);
    expect(r.warnings[0]!.message).toContain('nope.service');
    expect(fs.readlinkSync(path.join(r.path, 'etc/systemd/system/multi-user.target.wants/vendor.service'))).toBe('/usr/lib/systemd/system/vendor.service');
  });

  it('reaches the CLI output, as a warning (exit 0)', async () => {
    env = await ignitionEnv();
    const file = path.join(env.scratch, 'missing-unit.ign');
    fs.writeFileSync(file, JSON.stringify(config({ systemd: { units: [{ name: 'nope.service', enabled: true }] } })));
    const r = await cli(['stage', file, '--sysroot', env.dir]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/stagedroot: warning: UNIT_NOT_FOUND at systemd\.units\[0\]: nope\.service is not enabled/);
  });

  it('still refuses a unit whose unit file cannot be read (its [Install] is unknown)', async () => {
    env = await ignitionEnv({ 'etc/systemd/system/loop.service': { symlink: 'loop.service' } });
    const e = await stageRejected(env, config({ systemd: { units: [{ name: 'loop.service', enabled: true }] } }));
    expect([e.code, e.path]).toEqual(['APPLY_FAILED', 'systemd.units[0]']);
    expect(e.message).toContain('cannot be read');
  });
});

describe('unknown keys', () => {
  it('are warnings with their paths, and the rest of the config is applied (a leftover spec-2 "filesystem")', async () => {
    env = await ignitionEnv();
    const r = await stage(config({
      storage: {
        files: [{ filesystem: 'root', path: '/etc/motd', contents: { source: pct('hi\n'), verification: { extra: 1 } } }],
        fiels: [],
      },
      systemd: { units: [{ name: 'vendor.service', enable: true }] },
      extraTopLevel: { anything: true },
    }));
    expect(read(r.path, 'etc/motd')).toBe('hi\n');
    expect(codesAt(r.warnings).sort()).toEqual([
      'UNKNOWN_FIELD extraTopLevel',
      'UNKNOWN_FIELD storage.fiels',
      'UNKNOWN_FIELD storage.files[0].contents.verification.extra',
      'UNKNOWN_FIELD storage.files[0].filesystem',
      'UNKNOWN_FIELD systemd.units[0].enable',
    ]);
  });

  it('reach the CLI output, as warnings (exit 0); --json carries them', async () => {
    env = await ignitionEnv();
    const file = path.join(env.scratch, 'spec2-leftover.ign');
    fs.writeFileSync(file, JSON.stringify(config({ storage: { files: [{ filesystem: 'root', path: '/etc/motd', contents: { source: pct('hi\n') } }] } })));
    const r = await cli(['stage', file, '--sysroot', env.dir]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain('stagedroot: warning: UNKNOWN_FIELD at storage.files[0].filesystem');
    const j = await cli(['stage', file, '--sysroot', env.dir, '--json']);
    expect(JSON.parse(j.out).warnings).toEqual([expect.objectContaining({ code: 'UNKNOWN_FIELD', path: 'storage.files[0].filesystem', severity: 'warning' })]);
  });

  it('do not excuse a known field stagedroot does not apply', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, config({ storage: { files: [{ path: '/etc/a', contents: { source: pct('x') }, typo: 1 }], disks: [{ device: '/dev/sda' }] } }));
    expect(e.code).toBe('SOURCE_UNSUPPORTED');
    expect(e.issues.map((i) => `${i.severity} ${i.path}`)).toEqual(['error storage.disks']);
  });
});

describe('spec 3.6.0 and special mode bits', () => {
  const setuidConfig = (version: string) =>
    config({
      storage: {
        files: [{ path: '/usr/local/bin/tool', contents: { source: pct('#!/bin/sh\n') }, mode: 0o4755 }],
        directories: [{ path: '/srv/shared', mode: 0o1777 }],
      },
    }, version);

  it('3.6.0 applies setuid/setgid/sticky; the set-uid check then judges the file', async () => {
    env = await ignitionEnv();
    const e = await stageRejected(env, setuidConfig('3.6.0'));
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.issues.map((i) => `${i.code} ${i.path}`)).toEqual(['SETUID_NOT_ALLOWED usr/local/bin/tool']);

    env.sysroot = await Sysroot.open(env.dir, { builtins: { unsafeModes: { setuidAllowList: [...DEFAULT_SETUID_ALLOW_LIST, 'usr/local/bin/tool'] } } });
    const r = await stage(setuidConfig('3.6.0'));
    expect(mode(r.path, 'usr/local/bin/tool')).toBe(0o4755);
    expect(mode(r.path, 'srv/shared')).toBe(0o1777);
    expect(r.warnings).toEqual([]);
  });

  it('earlier versions ignore those bits, with a warning naming each field', async () => {
    env = await ignitionEnv();
    for (const version of ['3.0.0', '3.5.0']) {
      const r = await stage(setuidConfig(version));
      expect(mode(r.path, 'usr/local/bin/tool'), version).toBe(0o755);
      expect(mode(r.path, 'srv/shared'), version).toBe(0o777);
      expect(codesAt(r.warnings), version).toEqual(['MODE_BITS_IGNORED storage.files[0].mode', 'MODE_BITS_IGNORED storage.directories[0].mode']);
      expect(r.warnings[0]!.message).toContain('04755 is applied as 0755');
      await env.sysroot.discardStaged();
    }
  });
});
