import { describe, expect, it } from 'vitest';
import { decodeDataUrl, DataUrlError } from '../../../src/sources/ignition/data-url.js';
import { parseGroup, parsePasswd } from '../../../src/sources/ignition/passwd.js';
import { parseIgnition } from '../../../src/sources/ignition/parse.js';

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
    for (const v of ['3.0.0', '3.1.0', '3.2.0', '3.3.0', '3.4.0', '3.5.0', '3.6.0']) {
      expect(parseIgnition({ ignition: { version: v }, storage: { files: [{ path: '/a', mode: null, contents: { source: 'data:,x', compression: null } }] } }, 't').ignition.version).toBe(v);
    }
  });
});
