import { describe, expect, it } from 'vitest';
import { decodeDataUrl, DataUrlError } from '../../src/sources/ignition/data-url.js';
import { parseInstall } from '../../src/sources/ignition/unit-install.js';
import { expandSpecifiers, parseUnitName, templateNameOf, unitNameProblem } from '../../src/sources/ignition/unit-names.js';
import { parseGroup, parsePasswd } from '../../src/sources/ignition/passwd.js';
import { parseIgnition } from '../../src/sources/ignition/parse.js';

describe('data: URLs (RFC 2397)', () => {
  it.each([
    ['data:,hello%20world', 'hello world'],
    ['data:,a+b', 'a+b'],
    ['data:,', ''],
    ['DATA:,x', 'x'],
    ['data:text/plain;charset=US-ASCII,caf%C3%A9', 'café'],
    ['data:;base64,aGVsbG8=', 'hello'],
    ['data:application/octet-stream;base64,aGk%3D', 'hi'],
    ['data:text/plain;charset=utf-8;BASE64,', ''],
    ['data:,ünï', 'ünï'],
  ])('%s', (url, text) => {
    expect(decodeDataUrl(url).toString('utf8')).toBe(text);
  });

  it.each(['data:nocomma', 'data:,%', 'data:,%4', 'data:,%GG', 'data:;base64,abc', 'data:;base64,ab$=', 'data:;base64,a===', 'data:text,x', 'data:a/b/c,x', 'data:text/plain;x,y', 'data:base64,YQ==', 'http:,x'])('rejects %s', (url) => {
    expect(() => decodeDataUrl(url)).toThrow(DataUrlError);
  });
});

describe('[Install] sections', () => {
  it('reads lists, continuations, quoting, resets and DefaultInstance, from [Install] only', () => {
    const info = parseInstall([
      '[Unit]',
      'WantedBy=not-this.target',
      '[Install]',
      '# comment',
      'WantedBy=a.target b.target',
      'WantedBy=c.target \\',
      '  d.target',
      'RequiredBy=x.target',
      'RequiredBy=',
      'RequiredBy="y.target"',
      'UpheldBy=u.target',
      'Alias=al.service',
      'Also=other.socket',
      'DefaultInstance=inst',
      '[Service]',
      'Alias=not-this.service',
    ].join('\n'));
    expect(info).toEqual({
      wantedBy: ['a.target', 'b.target', 'c.target', 'd.target'],
      requiredBy: ['y.target'],
      upheldBy: ['u.target'],
      alias: ['al.service'],
      also: ['other.socket'],
      defaultInstance: 'inst',
    });
  });
});

describe('unit names', () => {
  it('accepts systemd names and refuses paths', () => {
    for (const n of ['a.service', 'getty@tty1.service', 'x@.socket', 'var-lib.mount', 'a:b_c-d.timer']) expect(unitNameProblem(n), n).toBeNull();
    for (const n of ['a', 'a.conf', '/a.service', 'a/b.service', '..service', 'a..b.service', '@x.service', 'a@b@c.service', 'x\\x2d.mount', 'a b.service', 'a'.repeat(250) + '.service']) {
      expect(unitNameProblem(n), n).not.toBeNull();
    }
  });

  it('expands the offline specifiers and refuses host ones', () => {
    const u = parseUnitName('sys-fs-thing@inst.service');
    expect(expandSpecifiers('%n %N %p %i %j 100%%', u)).toBe('sys-fs-thing@inst.service sys-fs-thing@inst sys-fs-thing inst thing 100%');
    expect(() => expandSpecifiers('%H', u)).toThrow(/not supported/);
  });
});

describe('passwd and group', () => {
  it('parses the tree\'s own databases, first entry winning, junk skipped', () => {
    const p = parsePasswd('# c\nroot:x:0:0:root:/root:/bin/sh\n+nis\nbad line\ncore:x:1000:1001::/var/home/core:/bin/bash\ncore:x:5:5::/x:/y\nneg:x:-1:0::/:/\n');
    expect([...p.keys()]).toEqual(['root', 'core']);
    expect(p.get('core')).toEqual({ name: 'core', uid: 1000, gid: 1001, home: '/var/home/core' });
    expect(parseGroup('wheel:x:10:core\nbroken\n').get('wheel')).toEqual({ name: 'wheel', gid: 10 });
  });
});

describe('parseIgnition', () => {
  it('reads every supported version and drops nulls as unset', () => {
    for (const v of ['3.0.0', '3.1.0', '3.2.0', '3.3.0', '3.4.0', '3.5.0']) {
      expect(parseIgnition({ ignition: { version: v }, storage: { files: [{ path: '/a', mode: null, contents: { source: 'data:,x', compression: null } }] } }, 't').ignition.version).toBe(v);
    }
  });
});

describe('templateNameOf', () => {
  it('maps an instance to its template, keeping dots inside the instance', () => {
    expect(templateNameOf('getty@tty1.service')).toBe('getty@.service');
    expect(templateNameOf('foo@a.b.service')).toBe('foo@.service');
    expect(templateNameOf('foo@.service')).toBe('foo@.service');
    expect(templateNameOf('sshd.service')).toBe('sshd.service');
  });
});
