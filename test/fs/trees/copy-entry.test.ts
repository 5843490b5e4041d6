import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RootFs } from '../../../src/fs/trees/root-fs.js';
import { copyOut } from '../../../src/fs/trees/copy-entry.js';
import { hashTree } from '../../../src/testing/index.js';

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

const run = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8' });
const attrs = (p: string): string => run('getfattr', '-h', '-d', '-m', '-', '-e', 'hex', '--absolute-names', p).replace(/^# file: .*\n/m, '');

/** A source directory with a set-id file (a capability, an ACL, a label), a symlink, a FIFO and a directory with a default ACL. */
function makeSource(): string {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-copy-entry-'));
  const from = path.join(base, 'from');
  fs.mkdirSync(from);
  fs.writeFileSync(path.join(from, 'tool'), 'bin\n', { mode: 0o4750 });
  fs.chownSync(path.join(from, 'tool'), 0, 1000);
  run('setcap', 'cap_net_bind_service+ep', path.join(from, 'tool'));
  run('setfacl', '-m', 'u:1000:rx', path.join(from, 'tool'));
  run('setfattr', '-n', 'security.selinux', '-v', 'system_u:object_r:bin_t:s0', path.join(from, 'tool'));
  fs.utimesSync(path.join(from, 'tool'), 1_600_000_000, 1_600_000_000);
  fs.symlinkSync('tool', path.join(from, 'link'));
  run('setfattr', '-h', '-n', 'trusted.x', '-v', 'y', path.join(from, 'link'));
  run('mkfifo', '-m', '0640', path.join(from, 'fifo'));
  run('setfattr', '-n', 'trusted.f', '-v', '1', path.join(from, 'fifo')); // user.* is for files and directories only
  fs.mkdirSync(path.join(from, 'd'), { mode: 0o750 });
  run('setfacl', '-d', '-m', 'g:1000:rx', path.join(from, 'd'));

  return from;
}

describe('RootFs.copyIn (the faithful single-entry copy the /etc merge uses)', () => {
  it('copies a file, a symlink, a FIFO and a directory with mode, owner, mtime and every extended attribute', () => {
    const from = makeSource();
    const tree = path.join(base!, 'tree');
    fs.mkdirSync(tree);
    fs.writeFileSync(path.join(tree, 'old'), 'replaced\n');
    const root = new RootFs(tree);
    const pairs: [string, string][] = [['etc/tool', 'tool'], ['etc/link', 'link'], ['etc/fifo', 'fifo'], ['etc/d', 'd'], ['old', 'tool']];
    for (const [rel, src] of pairs) root.copyIn(rel, path.join(from, src));
    for (const [rel, src] of pairs) {
      const a = fs.lstatSync(path.join(tree, rel));
      const b = fs.lstatSync(path.join(from, src));
      expect([a.mode, a.uid, a.gid], rel).toEqual([b.mode, b.uid, b.gid]);
      expect(attrs(path.join(tree, rel)), rel).toBe(attrs(path.join(from, src)));
    }
    expect(run('getcap', path.join(tree, 'etc/tool'))).toContain('cap_net_bind_service=ep');
    expect(fs.statSync(path.join(tree, 'etc/tool')).mtimeMs).toBe(1_600_000_000_000);
    expect(fs.readFileSync(path.join(tree, 'old'), 'utf8')).toBe('bin\n');
    expect(fs.readlinkSync(path.join(tree, 'etc/link'))).toBe('tool');
    expect(fs.lstatSync(path.join(tree, 'etc/fifo')).isFIFO()).toBe(true);
  });
});

describe('copyOut (a kept-aside local version) keeps entries as the tree copies do', () => {
  it('a file, a symlink, a FIFO and a directory, with mode, owner, times and every extended attribute', () => {
    const from = makeSource();
    const dst = path.join(base!, 'kept', 'from');
    expect(copyOut(from, dst, { recursive: true })).toBe(true);
    for (const name of ['tool', 'link', 'fifo', 'd']) {
      const a = fs.lstatSync(path.join(dst, name));
      const b = fs.lstatSync(path.join(from, name));
      expect([a.mode, a.uid, a.gid], name).toEqual([b.mode, b.uid, b.gid]);
      expect(attrs(path.join(dst, name)), name).toBe(attrs(path.join(from, name)));
    }
    expect(fs.lstatSync(path.join(dst, 'fifo')).isFIFO()).toBe(true);
    expect(fs.statSync(path.join(dst, 'tool')).mtimeMs).toBe(1_600_000_000_000);
    expect(run('getcap', path.join(dst, 'tool'))).toContain('cap_net_bind_service=ep');
  });
});

describe('a name that is not UTF-8 (latin-1 "caf\\xe9")', () => {
  it('copyOut copies it byte for byte (recursive), and hashTree reads it', () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-copy-out-latin1-'));
    const from = path.join(base, 'from');
    const latin1 = Buffer.from('caf\xe9', 'latin1');
    const dirBytes = Buffer.concat([Buffer.from(`${from}/`), latin1]);
    fs.mkdirSync(from);
    fs.mkdirSync(dirBytes);
    fs.writeFileSync(Buffer.concat([dirBytes, Buffer.from('/'), latin1]), 'latin-1\n');
    fs.symlinkSync(latin1, Buffer.concat([from, '/link'].map((x) => Buffer.from(x))));
    const before = hashTree(from);
    const dst = path.join(base, 'kept', 'from');
    expect(copyOut(from, dst, { recursive: true })).toBe(true);
    const names = fs.readdirSync(dst, { encoding: 'buffer' }).map((n) => n.toString('hex')).sort();
    expect(names).toEqual([latin1.toString('hex'), Buffer.from('link').toString('hex')].sort());
    const inner = Buffer.concat([Buffer.from(`${dst}/`), latin1, Buffer.from('/'), latin1]);
    expect(fs.readFileSync(inner, 'utf8')).toBe('latin-1\n');
    expect(fs.readlinkSync(Buffer.from(`${dst}/link`), { encoding: 'buffer' }).equals(latin1)).toBe(true);
    // the hash reads the name's content: the copy hashes alike, a change to that file shows
    expect(hashTree(dst)).toBe(before);
    fs.writeFileSync(inner, 'changed\n');
    expect(hashTree(dst)).not.toBe(before);
  });
});
