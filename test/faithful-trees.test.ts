import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readXattrs, writeXattrs } from '../src/fs/core/xattr.js';
import { ignitionSource } from '../src/sources/ignition/index.js';
import { Sysroot } from '../src/sysroot.js';
import { cli } from './helpers/cli.js';

/**
 * Issue 13's "done when": a tree with file capabilities, SELinux labels, ACLs, user
 * xattrs, a latin-1 name, a FIFO and a socket goes through init, a stage of each source
 * kind, finalize and verify with everything kept (the socket warned about), and verify
 * catches a changed capability.
 */
let base: string | undefined;
let server: net.Server | undefined;
afterEach(() => {
  server?.close();
  server = undefined;
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

const LATIN1 = Buffer.from('caf\xe9', 'latin1');
const run = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8' });
const dumpOf = (root: string, rels: string[]): string => rels.map((r) => run('getfattr', '-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', path.join(root, r)).replace(/^# file: .*\n/m, `# ${r}\n`)).join('');

async function faithfulBase(root: string): Promise<void> {
  fs.mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
  fs.mkdirSync(path.join(root, 'usr/share'), { recursive: true });
  fs.mkdirSync(path.join(root, 'etc/acl.d'), { recursive: true });
  fs.mkdirSync(path.join(root, 'run'), { recursive: true });
  fs.writeFileSync(path.join(root, 'usr/bin/ping'), '#!/bin/true\n', { mode: 0o755 });
  run('setcap', 'cap_net_raw+ep', path.join(root, 'usr/bin/ping'));
  fs.writeFileSync(path.join(root, 'etc/os-release'), 'ID=faithful\n');
  fs.writeFileSync(path.join(root, 'etc/label-me'), 'relabelled locally\n');
  run('setfattr', '-n', 'security.selinux', '-v', 'system_u:object_r:etc_t:s0', path.join(root, 'etc/os-release'));
  run('setfattr', '-n', 'user.origin', '-v', 'base', path.join(root, 'etc/os-release'));
  run('setfacl', '-m', 'u:1000:rw', path.join(root, 'etc/os-release'));
  run('setfacl', '-d', '-m', 'g:1000:rx', path.join(root, 'etc/acl.d'));
  fs.writeFileSync(Buffer.concat([Buffer.from(root + '/usr/share/'), LATIN1]), 'latin-1\n');
  run('mkfifo', '-m', '0600', path.join(root, 'run/initctl'));
  server = net.createServer();
  await new Promise<void>((resolve) => server!.listen(path.join(root, 'run/control.sock'), resolve));
}

const KEPT = ['usr/bin/ping', 'etc/os-release', 'etc/acl.d'];

describe('faithful trees through the whole lifecycle', () => {
  it('keeps capabilities, labels, ACLs, user xattrs, a latin-1 name and a FIFO through init, every source kind, finalize and verify', async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-faithful-e2e-'));
    const src = path.join(base, 'base');
    await faithfulBase(src);
    const sysroot = path.join(base, 'sysroot');
    const init = await cli(['init', '--sysroot', sysroot, '--from', src]);
    expect(init.code, init.err).toBe(0);
    expect(init.err).toContain('skipped 1 socket (runtime objects, not kept): run/control.sock');
    const want = dumpOf(src, KEPT);
    expect(want).toContain('security.capability=');
    expect(want).toContain('security.selinux=');
    expect(want).toContain('system.posix_acl_access=');
    expect(want).toContain('system.posix_acl_default=');
    expect(want).toContain('user.origin=');

    const s = await Sysroot.open(sysroot);
    const check = (tree: string): void => {
      expect(dumpOf(tree, KEPT)).toBe(want);
      expect(run('getcap', path.join(tree, 'usr/bin/ping'))).toContain('cap_net_raw=ep');
      expect(fs.readFileSync(Buffer.concat([Buffer.from(tree + '/usr/share/'), LATIN1]), 'utf8')).toBe('latin-1\n');
      expect(fs.lstatSync(path.join(tree, 'run/initctl')).isFIFO()).toBe(true);
      expect(fs.existsSync(path.join(tree, 'run/control.sock'))).toBe(false);
    };
    check(path.join(sysroot, 'current'));
    expect((await s.verify()).drift).toEqual([]);

    // Each source kind, one after the other, each finalized and booted.
    const layer = path.join(base, 'layer');
    fs.mkdirSync(path.join(layer, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(layer, 'etc/from-layer'), 'layer\n');
    run('setfattr', '-n', 'user.layer', '-v', '1', path.join(layer, 'etc/from-layer'));
    const tar = path.join(base, 'layer.tar');
    execFileSync('tar', ['--xattrs', '--xattrs-include=*', '--format=posix', '-cf', tar, 'etc'], { cwd: layer });
    const dir = path.join(base, 'dir');
    fs.mkdirSync(path.join(dir, 'etc'), { recursive: true });
    fs.writeFileSync(Buffer.concat([Buffer.from(dir + '/etc/'), LATIN1]), 'dir\n');
    const sources: [string, Parameters<Sysroot['stage']>[0]][] = [
      ['spec', { label: 'spec', files: [{ path: '/etc/motd', contents: 'hello\n' }] }],
      ['ignition', ignitionSource({ ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/ign.conf', contents: { source: 'data:,ign' } }] } })],
      ['tar layer', tar],
      ['directory', dir],
    ];
    let n = 0;
    for (const [kind, source] of sources) {
      const r = await s.stage(source);
      check(r.path);
      expect((await s.verify(r.id)).drift, kind).toEqual([]);
      // Local changes in the running etc/ (after the stage): a file with a latin-1 name and
      // a user.* attribute, a file relabelled; finalize's merge carries them.
      const live = path.join(sysroot, 'current');
      const local = Buffer.concat([Buffer.from(`${live}/etc/local-${n++}-`), LATIN1]);
      fs.writeFileSync(local, 'local\n');
      writeXattrs(local, [['user.local', Buffer.from(kind)]], { rel: 'local' }); // argv cannot carry the name's bytes
      run('setfattr', '-n', 'security.selinux', '-v', `system_u:object_r:etc_t:s${n}`, path.join(live, 'etc/label-me'));
      const liveWant = dumpOf(live, ['etc/os-release', 'etc/label-me']);
      await s.finalize();
      const merged = fs.readdirSync(path.join(sysroot, 'current/etc'), { encoding: 'buffer' }).filter((b) => b.includes(LATIN1) && b.toString('latin1').startsWith('local-'));
      expect(merged.length, kind).toBe(n);
      expect(readXattrs(Buffer.concat([Buffer.from(`${sysroot}/current/etc/`), merged[n - 1]!])), kind).toEqual([['user.local', Buffer.from(kind)]]);
      expect(dumpOf(path.join(sysroot, 'current'), ['etc/os-release', 'etc/label-me']), kind).toBe(liveWant);
      await s.boot();
      check(path.join(sysroot, 'current'));
      expect((await s.verify()).drift, kind).toEqual([]);
    }
    const now = path.join(sysroot, 'current');
    expect(run('getfattr', '-h', '-n', 'user.layer', '--only-values', path.join(now, 'etc/from-layer'))).toBe('1');
    expect(fs.readFileSync(Buffer.concat([Buffer.from(now + '/etc/'), LATIN1]), 'utf8')).toBe('dir\n');

    // A changed capability is drift, and the CLI names the latin-1 path escaped.
    run('setcap', 'cap_net_admin+ep', path.join(now, 'usr/bin/ping'));
    fs.writeFileSync(Buffer.concat([Buffer.from(now + '/usr/share/'), LATIN1]), 'changed\n');
    const v = await cli(['verify', '--sysroot', sysroot]);
    expect(v.code).toBe(1);
    expect(v.out).toMatch(/xattrs\s+usr\/bin\/ping/);
    expect(v.out).toMatch(/content\s+usr\/share\/caf\\xe9/);
  });
});
