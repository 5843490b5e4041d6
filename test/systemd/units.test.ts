import { describe, expect, it } from 'vitest';
import { parseInstall } from '../../src/systemd/unit-install.js';
import { expandSpecifiers, parseUnitName, templateNameOf, unitNameProblem } from '../../src/systemd/unit-names.js';

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

describe('templateNameOf', () => {
  it('maps an instance to its template, keeping dots inside the instance', () => {
    expect(templateNameOf('getty@tty1.service')).toBe('getty@.service');
    expect(templateNameOf('foo@a.b.service')).toBe('foo@.service');
    expect(templateNameOf('foo@.service')).toBe('foo@.service');
    expect(templateNameOf('sshd.service')).toBe('sshd.service');
  });
});
