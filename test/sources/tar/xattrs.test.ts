import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { readManifest } from '../../../src/fs/manifests/manifest.js';
import { takeXattrRecords } from '../../../src/sources/tar/pax-records.js';
import { reboot, tempSysroot, type TempSysroot } from '../../../src/testing/index.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

const NAIVE = Buffer.from([0x6e, 0x61, 0xef, 0x76, 0x65]); // "naïve" in latin-1: not UTF-8
const run = (cmd: string, args: string[], cwd?: string): string => execFileSync(cmd, args, { encoding: 'utf8', cwd });
const hasUmoci = (() => {
  try {
    execFileSync('umoci', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn('SKIPPED: the OCI image xattr test: umoci is not installed (.ci/run installs it)');
    return false;
  }
})();
const getfattr = (p: string): string => run('getfattr', ['-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', p]);

/** A layer directory: a file with a capability, one with a binary user.* value holding a newline, a labelled directory, a latin-1 name. */
function layerDir(root: string): void {
  fs.mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
  fs.mkdirSync(path.join(root, 'etc/app'), { recursive: true });
  fs.writeFileSync(path.join(root, 'usr/bin/newuidmap'), 'bin\n', { mode: 0o755 });
  run('setcap', ['cap_setuid+ep', path.join(root, 'usr/bin/newuidmap')]);
  fs.writeFileSync(path.join(root, 'etc/app/conf'), 'conf\n');
  run('setfattr', ['-n', 'user.blob', '-v', '0x000a0aff', path.join(root, 'etc/app/conf')]);
  run('setfattr', ['-n', 'security.selinux', '-v', 'system_u:object_r:etc_t:s0', path.join(root, 'etc/app')]);
  fs.writeFileSync(Buffer.concat([Buffer.from(root + '/etc/'), NAIVE]), 'latin-1\n');
}

function expectApplied(tree: string, manifest: string): void {
  expect(getfattr(path.join(tree, 'usr/bin/newuidmap'))).toMatch(/security\.capability=0x/);
  expect(run('getcap', [path.join(tree, 'usr/bin/newuidmap')])).toContain('cap_setuid=ep');
  expect(getfattr(path.join(tree, 'etc/app/conf'))).toContain('user.blob=0x000a0aff');
  expect(getfattr(path.join(tree, 'etc/app'))).toContain('security.selinux=0x' + Buffer.from('system_u:object_r:etc_t:s0').toString('hex'));
  expect(fs.readFileSync(Buffer.concat([Buffer.from(tree + '/etc/'), NAIVE]), 'utf8')).toBe('latin-1\n');
  const entries = new Map([...readManifest(manifest)].map((e) => [e.p, e]));
  expect(entries.get('etc/na\udcefve')?.h).toMatch(/^[0-9a-f]{64}$/);
  for (const p of ['usr/bin/newuidmap', 'etc/app/conf', 'etc/app']) expect(entries.get(p)?.x, p).toMatch(/^[0-9a-f]{32}$/);
}

describe('layers keep extended attributes and byte names', () => {
  it('a GNU tar --xattrs archive: SCHILY.xattr records become attributes, binary values included; verify, finalize and verify again', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'h\n' } });
    const src = path.join(t.scratch, 'layer');
    layerDir(src);
    const tar = path.join(t.scratch, 'layer.tar');
    run('tar', ['--xattrs', "--xattrs-include=*", '--format=posix', '-cf', tar, 'usr', 'etc'], src);
    const r = await t.sysroot.stage(tar);
    expectApplied(r.path, path.join(path.dirname(r.path), 'manifest.ndjson'));
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    await reboot(t.sysroot);
    expect((await t.sysroot.verify()).drift).toEqual([]);
    expect((await t.sysroot.diff('0001', r.id)).map((c) => c.path)).toContain('etc/na\udcefve');
  });

  it('a directory source: its entries\' attributes and names are applied', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'h\n' } });
    const src = path.join(t.scratch, 'overlay');
    layerDir(src);
    const r = await t.sysroot.stage(src);
    expectApplied(r.path, path.join(path.dirname(r.path), 'manifest.ndjson'));
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
  });

  it.skipIf(!hasUmoci)('an OCI image built by umoci: capabilities, user xattrs and a latin-1 name (Go writes it as a binary PAX path)', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'h\n' } });
    const src = path.join(t.scratch, 'layer');
    layerDir(src);
    const layout = path.join(t.scratch, 'img');
    run('umoci', ['init', '--layout', layout]);
    run('umoci', ['new', '--image', `${layout}:t`]);
    run('umoci', ['config', '--image', `${layout}:t`, '--os', 'linux', '--architecture', process.arch === 'arm64' ? 'arm64' : 'amd64']);
    run('umoci', ['insert', '--image', `${layout}:t`, src, '/']);
    const r = await t.sysroot.stage(layout);
    // umoci keeps capabilities and user.* but not security.selinux: the label is not checked here.
    expect(getfattr(path.join(r.path, 'usr/bin/newuidmap'))).toMatch(/security\.capability=0x/);
    expect(getfattr(path.join(r.path, 'etc/app/conf'))).toContain('user.blob=0x000a0aff');
    expect(fs.readFileSync(Buffer.concat([Buffer.from(r.path + '/etc/'), NAIVE]), 'utf8')).toBe('latin-1\n');
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
  });

  it.each(['gnu', 'ustar', 'posix'])('a %s archive keeps a latin-1 name byte for byte', async (format) => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'h\n' } });
    const src = path.join(t.scratch, 'layer');
    fs.mkdirSync(path.join(src, 'etc'), { recursive: true });
    fs.writeFileSync(Buffer.concat([Buffer.from(src + '/etc/'), NAIVE]), 'latin-1\n');
    const tar = path.join(t.scratch, 'layer.tar');
    run('tar', [`--format=${format}`, '-cf', tar, 'etc'], src);
    const r = await t.sysroot.stage(tar);
    expect(fs.readdirSync(path.join(r.path, 'etc'), { encoding: 'buffer' }).map((b) => b.toString('hex')).sort()).toEqual([Buffer.from('hostname').toString('hex'), NAIVE.toString('hex')].sort());
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
  });

  it('refuses an attribute outside the Linux namespaces, naming it', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'h\n' } });
    const body = (k: string, v: string): string => {
      const rec = ` ${k}=${v}\n`;
      let n = rec.length + 1;
      while (String(n).length + rec.length !== n) n += 1;
      return `${n}${rec}`;
    };
    // A PAX header carrying com.apple.quarantine (macOS), then the file.
    const pax = Buffer.from(body('SCHILY.xattr.com.apple.quarantine', 'x') + body('path', 'etc/f'));
    const { xattrs } = takeXattrRecords(pax);
    expect(xattrs).toEqual([['com.apple.quarantine', Buffer.from('x')]]);
    const src = path.join(t.scratch, 'mac');
    fs.mkdirSync(path.join(src, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(src, 'etc/f'), 'f\n');
    // GNU tar cannot write that namespace from Linux; write the archive by hand with node-tar's Header.
    const { Header } = await import('tar');
    const block = (h: ConstructorParameters<typeof Header>[0]): Buffer => {
      const b = Buffer.alloc(512);
      new Header(h).encode(b, 0);
      return b;
    };
    const pad = (b: Buffer): Buffer => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);
    const tarBytes = Buffer.concat([
      block({ path: 'PaxHeader/f', type: 'ExtendedHeader', size: pax.length, mode: 0o644, mtime: new Date(0) }),
      pad(pax),
      block({ path: 'etc/f', type: 'File', size: 2, mode: 0o644, mtime: new Date(0) }),
      pad(Buffer.from('f\n')),
      Buffer.alloc(1024),
    ]);
    const tar = path.join(t.scratch, 'mac.tar');
    fs.writeFileSync(tar, tarBytes);
    const err = await t.sysroot.stage(tar).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(StagedrootError);
    expect((err as StagedrootError).code).toBe('SOURCE_UNSUPPORTED');
    expect((err as StagedrootError).message).toContain('com.apple.quarantine');
  });
});
