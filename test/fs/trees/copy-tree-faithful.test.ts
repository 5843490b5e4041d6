import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { copyTree } from '../../../src/fs/trees/copy-tree.js';
import { diffManifests } from '../../../src/fs/manifests/diff-manifests.js';
import { readManifest } from '../../../src/fs/manifests/manifest.js';
import { verifyTree } from '../../../src/fs/manifests/verify-tree.js';

let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

const LATIN1 = Buffer.from([0x63, 0x61, 0x66, 0xe9]); // "café" in latin-1: not UTF-8
const run = (cmd: string, ...args: (string | Buffer)[]): string => execFileSync(cmd, args as string[], { encoding: 'utf8' });
/** Every attribute of a tree, as getfattr dumps it (relative names, symlinks not followed). */
const dump = (root: string): string => execFileSync('getfattr', ['-R', '-h', '-d', '-m', '-', '-e', 'hex', '.'], { cwd: root, encoding: 'utf8' });

/** A small OS-like tree with what real trees carry: caps, a label, ACLs, user/trusted xattrs, a latin-1 name, a FIFO, a socket. */
async function faithfulTree(root: string): Promise<{ close: () => void }> {
  fs.mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
  fs.mkdirSync(path.join(root, 'usr/share'), { recursive: true });
  fs.mkdirSync(path.join(root, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(root, 'usr/bin/ping'), '#!/bin/true\n', { mode: 0o755 });
  run('setcap', 'cap_net_raw+ep', path.join(root, 'usr/bin/ping'));
  fs.writeFileSync(path.join(root, 'etc/os-release'), 'ID=test\n');
  run('setfattr', '-n', 'security.selinux', '-v', 'system_u:object_r:etc_t:s0', path.join(root, 'etc/os-release'));
  run('setfattr', '-n', 'user.origin', '-v', 'base', path.join(root, 'etc/os-release'));
  run('setfacl', '-m', 'u:1000:rw', path.join(root, 'etc/os-release'));
  fs.mkdirSync(path.join(root, 'etc/shared'));
  run('setfacl', '-d', '-m', 'g:1000:rx', path.join(root, 'etc/shared'));
  fs.writeFileSync(Buffer.concat([Buffer.from(root + '/usr/share/'), LATIN1]), 'latin-1 name\n');
  fs.symlinkSync(Buffer.concat([LATIN1]), path.join(root, 'usr/share/link'));
  run('setfattr', '-h', '-n', 'trusted.overlay.x', '-v', 'y', path.join(root, 'usr/share/link'));
  run('mkfifo', '-m', '0620', path.join(root, 'etc/initctl'));
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(path.join(root, 'etc/control.sock'), resolve));
  return { close: () => server.close() };
}

describe('copyTree keeps trees faithful', () => {
  it.each(['copy', 'reflink'] as const)('%s: capabilities, labels, ACLs, user/trusted xattrs, byte names and FIFOs survive; sockets are reported', async (mode) => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-faithful-'));
    const src = path.join(base, 'src');
    const t = await faithfulTree(src);
    const dst = path.join(base, 'dst');
    fs.mkdirSync(dst);
    const skipped: string[] = [];
    try {
      copyTree({ src, dst, policy: { hardlinkPrefixes: ['usr'], mode }, manifestOut: path.join(base, 'm1'), onSkip: (rel, why) => skipped.push(`${rel}: ${why}`) });
    } finally {
      t.close();
    }
    expect(skipped).toEqual(['etc/control.sock: socket']);
    fs.rmSync(path.join(src, 'etc/control.sock'), { force: true }); // closing the server may remove it
    expect(dump(dst)).toBe(dump(src));
    expect(dump(dst)).toContain('security.capability=');
    expect(run('getcap', path.join(dst, 'usr/bin/ping'))).toContain('cap_net_raw=ep');
    expect(fs.lstatSync(path.join(dst, 'etc/initctl')).isFIFO()).toBe(true);
    expect(fs.lstatSync(path.join(dst, 'etc/initctl')).mode & 0o7777).toBe(0o620);
    const latin = Buffer.concat([Buffer.from(dst + '/usr/share/'), LATIN1]);
    expect(fs.readFileSync(latin, 'utf8')).toBe('latin-1 name\n');
    expect(fs.readlinkSync(path.join(dst, 'usr/share/link'), { encoding: 'buffer' }).equals(LATIN1)).toBe(true);

    const entries = new Map([...readManifest(path.join(base, 'm1'))].map((e) => [e.p, e]));
    expect(entries.get('usr/bin/ping')?.x).toMatch(/^[0-9a-f]{32}$/);
    expect(entries.get('etc/os-release')?.x).toMatch(/^[0-9a-f]{32}$/);
    expect(entries.get('etc/shared')?.x).toMatch(/^[0-9a-f]{32}$/);
    expect(entries.get('usr/share/caf\udce9')?.t).toBe('f');
    expect(entries.get('usr/share/link')?.l).toBe('caf\udce9');
    expect(entries.get('etc/initctl')?.t).toBe('o');
    expect(entries.get('usr/bin')?.x).toBeUndefined();
    expect(verifyTree(dst, path.join(base, 'm1'))).toEqual([]);

    // A second generation copied from the first (hash cache, reused lines) keeps them too.
    const dst2 = path.join(base, 'dst2');
    fs.mkdirSync(dst2);
    copyTree({ src: dst, dst: dst2, policy: { hardlinkPrefixes: ['usr'], mode }, srcManifest: path.join(base, 'm1'), manifestOut: path.join(base, 'm2') });
    expect(dump(dst2)).toBe(dump(src));
    expect(diffManifests(path.join(base, 'm1'), path.join(base, 'm2'))).toEqual([]);

    // A changed capability and a changed label are drift, named by path.
    run('setcap', 'cap_net_admin+ep', path.join(dst2, 'usr/bin/ping'));
    run('setfattr', '-n', 'security.selinux', '-v', 'system_u:object_r:shadow_t:s0', path.join(dst2, 'etc/os-release'));
    fs.writeFileSync(Buffer.concat([Buffer.from(dst2 + '/usr/share/'), LATIN1]), 'changed\n');
    const drift = verifyTree(dst2, path.join(base, 'm2'));
    expect(drift.map((d) => `${d.kind} ${d.path}`).sort()).toEqual(['content usr/share/caf\udce9', 'xattrs etc/os-release', 'xattrs usr/bin/ping']);

    // A tree copied from the changed one records the new attributes: diff names them.
    const dst3 = path.join(base, 'dst3');
    fs.mkdirSync(dst3);
    copyTree({ src: dst2, dst: dst3, policy: { hardlinkPrefixes: [], mode }, srcManifest: path.join(base, 'm2'), manifestOut: path.join(base, 'm3') });
    expect(diffManifests(path.join(base, 'm2'), path.join(base, 'm3'))).toEqual([
      { path: 'etc/os-release', change: 'modified', what: ['xattrs'] },
      { path: 'usr/bin/ping', change: 'modified', what: ['xattrs'] },
      { path: 'usr/share/caf\udce9', change: 'modified', what: ['content'] },
    ]);
  });
});
