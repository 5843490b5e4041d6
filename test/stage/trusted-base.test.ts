/**
 * A stage trusts the booted deployment's manifest under the hardlink prefixes (usr/ is
 * read-only on a booted host; a btrfs snapshot trusts it the same way): a change made in
 * place to the booted usr/ is not re-recorded by the stage, so `verify` reports it on
 * both deployments (their usr/ files are one inode), while a local change to etc/ is
 * recorded as the copy finds it. This includes issue 13's case: an in-place extended
 * attribute change on a hardlinked usr/ file keeps the old manifest line.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempSysroot } from '../../src/testing/index.js';
import type { Drift } from '../../src/fs/manifests/verify-tree.js';

const kinds = (drift: Drift[]): string[] => drift.map((d) => `${d.kind} ${d.path}`).sort();

describe('a stage trusts the booted usr/ as its manifest records it', () => {
  it('an in-place change to the booted usr/ (attribute, content, a new file) is drift on both deployments; a local etc/ change is recorded', async () => {
    const t = await tempSysroot({ tree: { 'usr/bin/ping': { content: '#!/bin/true\n', mode: 0o755 }, 'usr/lib/x': 'x\n', 'etc/hostname': 'node\n' }, shared: [] });
    try {
      const booted = t.sysroot.treePath('0001');
      execFileSync('setfattr', ['-n', 'user.changed', '-v', 'in place', path.join(booted, 'usr/bin/ping')]);
      fs.appendFileSync(path.join(booted, 'usr/lib/x'), 'appended in place\n');
      fs.writeFileSync(path.join(booted, 'usr/lib/added'), 'added in place\n');
      fs.writeFileSync(path.join(booted, 'etc/hostname'), 'renamed\n');

      const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello\n' }] });
      const staged = t.sysroot.treePath(r.id);
      // The usr/ files are shared, so the change is in both trees.
      expect(fs.statSync(path.join(staged, 'usr/bin/ping')).ino).toBe(fs.statSync(path.join(booted, 'usr/bin/ping')).ino);
      expect(fs.readFileSync(path.join(staged, 'usr/lib/added'), 'utf8')).toBe('added in place\n');

      const inUsr = ['content usr/lib/x', 'extra usr/lib/added', 'xattrs usr/bin/ping'];
      expect(kinds((await t.sysroot.verify('0001')).drift)).toEqual(['content etc/hostname', ...inUsr].sort());
      // The stage took usr/'s lines from the booted manifest (the old attribute digest, the old
      // hash, no line for the new file), and recorded etc/ as it found it.
      expect(kinds((await t.sysroot.verify(r.id)).drift)).toEqual(inUsr);
    } finally {
      t.cleanup();
    }
  });
});
