import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { readXattrs, replaceXattrs, writeXattrs, xattrDigest } from '../../../src/fs/core/xattr.js';

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

const getfattr = (p: string): string => execFileSync('getfattr', ['-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', p], { encoding: 'utf8' });

describe('extended attributes', () => {
  it('reads and writes a symlink\'s own attributes, never its target\'s', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-xattr-'));
    fs.writeFileSync(path.join(base, 'f'), 'x');
    fs.symlinkSync('f', path.join(base, 'l'));
    writeXattrs(path.join(base, 'l'), [['trusted.t', Buffer.from('1')]], { rel: 'l' });
    expect(readXattrs(path.join(base, 'l'))).toEqual([['trusted.t', Buffer.from('1')]]);
    expect(readXattrs(path.join(base, 'f'))).toEqual([]);
    expect(getfattr(path.join(base, 'l'))).toContain('trusted.t=0x31');
  });

  it('reads and writes a name that is not UTF-8, through getfattr/setfattr', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-xattr-'));
    const host = Buffer.concat([Buffer.from(base + '/caf'), Buffer.from([0xe9, 0x0a])]); // with a final newline
    fs.writeFileSync(host, 'x');
    writeXattrs(host, [['user.a', Buffer.from([0, 1, 0xff])], ['user.b', Buffer.from('v')]], { rel: 'caf\\xe9' });
    expect(readXattrs(host)).toEqual([['user.a', Buffer.from([0, 1, 0xff])], ['user.b', Buffer.from('v')]]);
    replaceXattrs(host, [['user.b', Buffer.from('w')]], { rel: 'x' });
    expect(readXattrs(host)).toEqual([['user.b', Buffer.from('w')]]);
  });

  it('a path given as a Buffer that is UTF-8 takes the native calls: no getfattr/setfattr needed (a minimal Debian has no attr package)', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-xattr-'));
    const host = Buffer.from(path.join(base, 'café'));
    fs.writeFileSync(host, 'x');
    const saved = process.env.PATH;
    process.env.PATH = path.join(base, 'no-tools-here');
    try {
      writeXattrs(host, [['user.a', Buffer.from('1')], ['user.b', Buffer.from('2')]], { rel: 'café' });
      replaceXattrs(host, [['user.b', Buffer.from('3')]], { rel: 'café' });
      expect(readXattrs(host)).toEqual([['user.b', Buffer.from('3')]]);
    } finally {
      process.env.PATH = saved;
    }
    expect(getfattr(path.join(base, 'café'))).toContain('user.b=0x33');
  });

  it('digests sorted name/value pairs: a changed value changes the digest; none gives none', () => {
    const a = xattrDigest([['security.capability', Buffer.from('a')], ['user.x', Buffer.from('1')]]);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(xattrDigest([['security.capability', Buffer.from('b')], ['user.x', Buffer.from('1')]])).not.toBe(a);
    // name/value boundaries are part of the digest
    expect(xattrDigest([['user.ab', Buffer.from('c')]])).not.toBe(xattrDigest([['user.a', Buffer.from('bc')]]));
    expect(xattrDigest([])).toBeUndefined();
  });

  it('names the attribute and the path when the filesystem refuses it, or drops it with a report when asked', () => {
    // /proc files take no user.* attributes: the refusal a filesystem without the namespace gives.
    const target = '/proc/self/status';
    let err: unknown;
    try {
      writeXattrs(target, [['user.x', Buffer.from('1')]], { rel: 'etc/x' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StagedrootError);
    expect((err as StagedrootError).code).toBe('XATTR_UNSUPPORTED');
    expect((err as StagedrootError).message).toContain('user.x');
    expect((err as StagedrootError).message).toContain('etc/x');
    const dropped: string[] = [];
    const kept = writeXattrs(target, [['user.x', Buffer.from('1')]], { rel: 'etc/x', policy: 'drop', onDrop: (rel, name) => dropped.push(`${rel} ${name}`) });
    expect(kept).toEqual([]);
    expect(dropped).toEqual(['etc/x user.x']);
  });
});
