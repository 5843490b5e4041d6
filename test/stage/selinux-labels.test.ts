import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostPath } from '../../src/fs/core/names.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

/**
 * Labels of what an update writes come from the staged tree's own policy. The policy is
 * Debian's selinux-policy-default (its file_contexts copied into the tree); the expected
 * labels are matchpathcon's for the same paths and types, run here on the host's copy.
 */
const HOST_FILES = '/etc/selinux/default/contexts/files';
const missing = !fs.existsSync(`${HOST_FILES}/file_contexts`) ? 'selinux-policy-default is not installed' : spawnable('matchpathcon') ? null : 'matchpathcon (selinux-utils) is not installed';
if (missing) console.warn(`SKIPPED: SELinux labelling tests: ${missing} (.ci/run installs it)`);

function spawnable(cmd: string): boolean {
  try {
    execFileSync(cmd, ['-V'], { stdio: 'ignore' });
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

/** The label on disk, without libselinux's terminating NUL; null when there is none. */
function labelOf(tree: string, rel: string): string | null {
  try {
    const out = execFileSync('getfattr', ['-h', '--only-values', '-n', 'security.selinux', '--absolute-names', String(hostPath(tree, rel))], { encoding: 'latin1', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.replace(/\0$/, '');
  } catch {
    return null;
  }
}

const expected = (rel: string, type: string): string => execFileSync('matchpathcon', ['-N', '-n', '-f', `${HOST_FILES}/file_contexts`, '-m', type, '--', '/' + rel], { encoding: 'utf8' }).trim();

function policyTree(): Record<string, string> {
  const spec: Record<string, string> = { 'etc/selinux/config': 'SELINUX=enforcing\nSELINUXTYPE=default\n', 'etc/hostname': 'node\n', 'usr/bin/old': 'old\n' };
  for (const n of fs.readdirSync(HOST_FILES)) {
    if (fs.statSync(path.join(HOST_FILES, n)).isFile()) spec[`etc/selinux/default/contexts/files/${n}`] = fs.readFileSync(path.join(HOST_FILES, n), 'latin1');
  }
  return spec;
}

describe.skipIf(missing !== null)('SELinux labels from the new tree\'s policy', () => {
  it('labels every file, directory and link an update writes as matchpathcon does; leaves the rest alone', async () => {
    t = await tempSysroot({ tree: policyTree(), shared: [] }); // var/lib written into the tree here (a shared /var takes it at finalize)
    const r = await t.sysroot.stage({
      label: 'labelled',
      files: [
        { path: '/etc/app.conf', contents: 'x=1\n' },
        { path: '/usr/bin/newtool', contents: '#!/bin/sh\n', mode: '0755' },
        { path: '/usr/lib/newlib/libnew.so.1', contents: 'lib\n' },
        { path: '/etc/ssh/sshd_config.d/10-x.conf', contents: 'X yes\n' },
      ],
      directories: [{ path: '/var/lib/newstate', mode: '0700' }],
      symlinks: [{ path: '/etc/localtime', target: '/usr/share/zoneinfo/UTC' }],
    });
    const written: [string, string][] = [
      ['etc/app.conf', 'file'],
      ['usr/bin/newtool', 'file'],
      ['usr/lib/newlib', 'dir'],
      ['usr/lib/newlib/libnew.so.1', 'file'],
      ['etc/ssh', 'dir'],
      ['etc/ssh/sshd_config.d', 'dir'],
      ['etc/ssh/sshd_config.d/10-x.conf', 'file'],
      ['var/lib/newstate', 'dir'],
      ['etc/localtime', 'lnk_file'],
    ];
    for (const [rel, type] of written) expect(labelOf(r.path, rel), rel).toBe(expected(rel, type));
    // The policy's own words for a few of them (the test would not notice a matchpathcon that labels everything alike).
    expect(labelOf(r.path, 'etc/app.conf')).toMatch(/:etc_t:/);
    expect(labelOf(r.path, 'usr/bin/newtool')).toMatch(/:bin_t:/);
    expect(labelOf(r.path, 'usr/lib/newlib/libnew.so.1')).toMatch(/:lib_t:/);
    expect(labelOf(r.path, 'var/lib/newstate')).toMatch(/:var_lib_t:/);
    // Not written by the update: untouched (the base tree had no labels).
    expect(labelOf(r.path, 'etc/hostname')).toBeNull();
    expect(labelOf(r.path, 'usr/bin/old')).toBeNull();
    // Labels are part of the manifest: the staged tree verifies, and a changed label is drift.
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    execFileSync('setfattr', ['-n', 'security.selinux', '-v', 'system_u:object_r:shadow_t:s0', path.join(r.path, 'etc/app.conf')]);
    expect((await t.sysroot.verify(r.id)).drift.map((d) => `${d.kind} ${d.path}`)).toEqual(['xattrs etc/app.conf']);
  });

  it('keeps the label a layer gives, and labels what it does not', async () => {
    t = await tempSysroot({ tree: policyTree() });
    const src = path.join(t.scratch, 'layer');
    fs.mkdirSync(path.join(src, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(src, 'etc/given'), 'g\n');
    fs.writeFileSync(path.join(src, 'etc/plain'), 'p\n');
    execFileSync('setfattr', ['-n', 'security.selinux', '-v', 'system_u:object_r:shadow_t:s0', path.join(src, 'etc/given')]);
    const tar = path.join(t.scratch, 'layer.tar');
    execFileSync('tar', ['--xattrs', '--xattrs-include=*', '--format=posix', '-cf', tar, 'etc'], { cwd: src });
    const r = await t.sysroot.stage(tar);
    expect(labelOf(r.path, 'etc/given')).toBe('system_u:object_r:shadow_t:s0');
    expect(labelOf(r.path, 'etc/plain')).toBe(expected('etc/plain', 'file'));
  });

  it('finalize\'s merge labels what it carries without a label of its own, and keeps a carried label', async () => {
    t = await tempSysroot({ tree: policyTree() });
    await t.sysroot.stage({ files: [{ path: '/etc/app.conf', contents: 'x=1\n' }] });
    const live = path.join(t.dir, 'current');
    fs.mkdirSync(path.join(live, 'etc/local.d'));
    fs.writeFileSync(path.join(live, 'etc/local.d/new.conf'), 'local\n');
    fs.writeFileSync(path.join(live, 'etc/labelled.conf'), 'local\n');
    execFileSync('setfattr', ['-n', 'security.selinux', '-v', 'system_u:object_r:shadow_t:s0', path.join(live, 'etc/labelled.conf')]);
    await t.sysroot.finalize();
    const now = path.join(t.dir, 'current');
    expect(labelOf(now, 'etc/local.d')).toBe(expected('etc/local.d', 'dir'));
    expect(labelOf(now, 'etc/local.d/new.conf')).toBe(expected('etc/local.d/new.conf', 'file'));
    expect(labelOf(now, 'etc/labelled.conf')).toBe('system_u:object_r:shadow_t:s0');
  });

  it('leaves what is written into a tree without a policy unlabelled', async () => {
    t = await tempSysroot({ tree: { 'etc/hostname': 'node\n' } });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/app.conf', contents: 'x\n' }] });
    expect(labelOf(r.path, 'etc/app.conf')).toBeNull();
  });
});
