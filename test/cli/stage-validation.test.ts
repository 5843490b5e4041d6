import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

function spec(doc: unknown): string {
  const p = path.join(t!.scratch, `spec-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(p, JSON.stringify(doc));
  return p;
}

describe('stage: built-in validator flags and command validators', () => {
  it('--validator: a failing command rejects with exit 3, its issue and output shown and kept', async () => {
    t = await tempSysroot({ tree: {} });
    const check = path.join(t.scratch, 'check.sh');
    fs.writeFileSync(check, '#!/bin/sh\necho "scanning $STAGEDROOT_TREE"\necho "etc/app.conf: port must be > 1024" >&2\nexit 1\n', { mode: 0o755 });
    const r = await cli(['stage', spec({ files: [{ path: '/etc/app.conf', contents: 'port=80\n' }] }), '--validator', check, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain(`error VALIDATOR_FAILED at (root): validator ${check} exited 1: etc/app.conf: port must be > 1024`);
    expect(r.err).toMatch(/scanning \/.*\/work\/0002\/tree/);
    const st = JSON.parse((await cli(['status', '--json', '--sysroot', t.dir])).out);
    expect(st.lastFailure).toMatchObject({ phase: 'validate', issues: [{ code: 'VALIDATOR_FAILED' }], output: expect.stringContaining('port must be > 1024') });
  });

  it('--no-verify-units, --no-check-modes switch built-ins off; --allow-setuid extends the allow-list', async () => {
    t = await tempSysroot({ tree: {} });
    const broken = spec({ files: [{ path: '/etc/systemd/system/x.service', contents: '[Servce]\n' }] });
    expect((await cli(['stage', broken, '--sysroot', t.dir])).code).toBe(3);
    expect((await cli(['stage', broken, '--no-verify-units', '--sysroot', t.dir])).code).toBe(0);
    const ww = spec({ files: [{ path: '/etc/a', contents: 'x', mode: '0666' }] });
    expect((await cli(['stage', ww, '--sysroot', t.dir])).code).toBe(3);
    expect((await cli(['stage', ww, '--no-check-modes', '--sysroot', t.dir])).code).toBe(0);
    const suid = spec({ files: [{ path: '/opt/tool/bin/t', contents: 'x', mode: '4755' }] });
    expect((await cli(['stage', suid, '--sysroot', t.dir])).code).toBe(3);
    expect((await cli(['stage', suid, '--allow-setuid', 'opt/tool', '--sysroot', t.dir])).code).toBe(0);
  });

  it('--require names paths the tree must have', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi' } });
    const r = await cli(['stage', spec({ files: [{ path: '/etc/a', contents: 'x' }] }), '--require', '/etc/machine-id', '--require', 'etc/motd', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('REQUIRED_PATH_MISSING at etc/machine-id');
    expect(r.err).not.toContain('at etc/motd');
  });

  it('--min-free: not enough space is exit 1 (NO_SPACE) with both figures, before anything is built', async () => {
    t = await tempSysroot({ tree: { 'etc/a': 'x' } });
    const r = await cli(['stage', spec({ files: [{ path: '/etc/b', contents: 'y' }] }), '--min-free', String(2 ** 50), '--sysroot', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/NO_SPACE: Not enough free space to stage: .* needed \(.*\), .* free on the filesystem of /);
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual(['0001']);
  });
});
