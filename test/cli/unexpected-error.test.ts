import { describe, expect, it } from 'vitest';
import { reportError, type Io } from '../../src/cli/io.js';

function io(env: NodeJS.ProcessEnv = {}, debug = false): Io & { text: () => string } {
  let err = '';
  return { out: () => {}, err: (t) => (err += t), errIsTty: false, env, debug, text: () => err };
}

describe('unexpected errors on the CLI', () => {
  const boom = Object.assign(new Error("ENOENT: no such file or directory, lstat 'usr/share/caf'"), { code: 'ENOENT' });

  it('print one line, stagedroot: CODE: message, without a stack', () => {
    const o = io();
    expect(reportError(o, boom, false)).toBe(1);
    expect(o.text()).toBe("stagedroot: IO: ENOENT: no such file or directory, lstat 'usr/share/caf'\n");
    const p = io();
    reportError(p, new TypeError('x is not a function'), false);
    expect(p.text()).toBe('stagedroot: INTERNAL: x is not a function\n');
  });

  it('show the stack with --debug or STAGEDROOT_DEBUG=1', () => {
    for (const o of [io({}, true), io({ STAGEDROOT_DEBUG: '1' })]) {
      reportError(o, boom, false);
      expect(o.text()).toContain('    at ');
    }
    const off = io({ STAGEDROOT_DEBUG: '0' });
    reportError(off, boom, false);
    expect(off.text()).not.toContain('    at ');
  });
});
