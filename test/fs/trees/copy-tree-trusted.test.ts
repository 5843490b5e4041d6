/**
 * The copy a stage makes from a deployment (copyTree with `trust`): under the hardlink
 * prefixes the source's manifest is trusted, so files are linked on readdir's word (no
 * lstat each) and no manifest is written during the copy; the manifest is written
 * afterwards, in one pass, by snapshotManifest. Checked against the copy that looks at
 * every entry and writes its manifest on the way (then patchManifest): the same tree
 * (names as bytes, types, modes, owners, times, extended attributes, links), the same
 * manifest line for line, and the same delta for a change set; also split over parts,
 * when a link is refused (EXDEV, EMLINK: copied instead), and when usr/ is a symlink or
 * missing.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { copyTree, type CopyResult } from '../../../src/fs/trees/copy-tree.js';
import { copyTreeSplit } from '../../../src/fs/trees/copy-split.js';
import { patchManifest } from '../../../src/fs/manifests/patch-manifest.js';
import { RootFs, type TouchEvent } from '../../../src/fs/trees/root-fs.js';
import { snapshotManifest, type SnapshotManifestResult } from '../../../src/fs/manifests/snapshot-manifest.js';
import { verifyTree } from '../../../src/fs/manifests/verify-tree.js';
import { noFaults } from '../../../src/fs/core/faults.js';
import { keyless, keylessEntries } from '../../helpers/manifest.js';
import { whyNoTmpfs } from '../../helpers/mounts.js';

const LATIN1 = Buffer.from([0x63, 0x61, 0x66, 0xe9]); // "café" in latin-1: not UTF-8
const policy = { hardlinkPrefixes: ['usr'], mode: 'reflink' as const };
const run = (cmd: string, ...args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8' });
const hooks = { faults: noFaults, checkAbort: () => {}, skip: () => {} };

/**
 * Every entry of a tree as find prints it, names as their bytes: type, mode, owner, size
 * (files), mtime to the millisecond (what a copy keeps; not of symlinks, whose times no
 * copy sets), link target; sorted.
 */
function describeTree(root: string): string {
  const out = execFileSync('find', ['.', '-mindepth', '1', '-printf', '%P\\0%y\\0%m\\0%U:%G\\0%s\\0%T@\\0%l\\n'], { cwd: root, encoding: 'latin1' });
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const [p, y, m, o, s, t, target] = l.split('\0');
      return [p, y, m, o, y === 'f' ? s : '', y === 'l' ? '' : t!.slice(0, t!.indexOf('.') + 4), target].join(' ');
    })
    .sort()
    .join('\n');
}
/** Every extended attribute of a tree, as getfattr dumps it (symlinks not followed). */
const dump = (root: string): string => execFileSync('getfattr', ['-R', '-h', '-d', '-m', '-', '-e', 'hex', '.'], { cwd: root, encoding: 'latin1' });
const ino = (root: string, rel: string): number => fs.lstatSync(path.join(root, rel)).ino;

let base: string;
let deployment: string; // a deployment's tree, copied from the source as init copies it
let manifest: string; // its manifest

/** An OS-like tree: caps, a label, ACLs, user/trusted xattrs, byte names, FIFOs, modes, times, names of one inode. */
function faithfulSource(root: string): void {
  const mk = (rel: string, mode = 0o755): void => void fs.mkdirSync(path.join(root, rel), { recursive: true, mode });
  mk('usr/bin');
  mk('usr/share/doc');
  mk('usr/lib/private', 0o750);
  mk('etc/ssh');
  fs.writeFileSync(path.join(root, 'usr/bin/ping'), '#!/bin/true\n', { mode: 0o755 });
  run('setcap', 'cap_net_raw+ep', path.join(root, 'usr/bin/ping'));
  fs.writeFileSync(path.join(root, 'usr/bin/su'), 'su\n', { mode: 0o4755 });
  fs.chmodSync(path.join(root, 'usr/bin/su'), 0o4755);
  fs.writeFileSync(path.join(root, 'usr/lib/private/key'), 'k\n', { mode: 0o600 });
  fs.chownSync(path.join(root, 'usr/lib/private/key'), 123, 456);
  fs.linkSync(path.join(root, 'usr/bin/su'), path.join(root, 'usr/bin/su-again')); // one inode, two names in usr/
  run('setfattr', '-n', 'user.dir', '-v', 'share', path.join(root, 'usr/share'));
  run('setfacl', '-d', '-m', 'g:1000:rx', path.join(root, 'usr/share/doc'));
  fs.writeFileSync(Buffer.concat([Buffer.from(root + '/usr/share/'), LATIN1]), 'latin-1 name\n');
  fs.mkdirSync(Buffer.concat([Buffer.from(root + '/usr/lib/'), LATIN1, Buffer.from('.d')]));
  fs.writeFileSync(Buffer.concat([Buffer.from(root + '/usr/lib/'), LATIN1, Buffer.from('.d/inside')]), 'in a latin-1 directory\n');
  fs.symlinkSync(LATIN1, path.join(root, 'usr/share/link'));
  run('setfattr', '-h', '-n', 'trusted.overlay.x', '-v', 'y', path.join(root, 'usr/share/link'));
  run('mkfifo', '-m', '0620', path.join(root, 'usr/lib/fifo'));
  for (let i = 0; i < 200; i++) {
    mk(`usr/lib/pkg${i % 10}`);
    fs.writeFileSync(path.join(root, `usr/lib/pkg${i % 10}/f${i}`), `file ${i}\n`);
  }
  fs.writeFileSync(path.join(root, 'etc/os-release'), 'ID=test\n');
  run('setfattr', '-n', 'security.selinux', '-v', 'system_u:object_r:etc_t:s0', path.join(root, 'etc/os-release'));
  run('setfattr', '-n', 'user.origin', '-v', 'base', path.join(root, 'etc/os-release'));
  run('setfacl', '-m', 'u:1000:rw', path.join(root, 'etc/os-release'));
  fs.writeFileSync(path.join(root, 'etc/ssh/host_key'), 'secret\n', { mode: 0o600 });
  fs.linkSync(path.join(root, 'etc/ssh/host_key'), path.join(root, 'etc/ssh/host_key.link')); // names of one inode in a copied part
  fs.writeFileSync(Buffer.concat([Buffer.from(root + '/etc/'), LATIN1]), 'latin-1 in etc\n');
  run('mkfifo', '-m', '0600', path.join(root, 'etc/initctl'));
  fs.symlinkSync('usr/bin', path.join(root, 'bin'));
  // Times last (creating children changes a directory's mtime).
  fs.utimesSync(path.join(root, 'usr/lib/private'), 1_000_000, 1_000_000);
  fs.utimesSync(path.join(root, 'usr/share/doc'), 1_234_567.891, 1_234_567.891);
}

beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-trusted-copy-'));
  const src = path.join(base, 'src');
  faithfulSource(src);
  deployment = path.join(base, 'deployment');
  fs.mkdirSync(deployment);
  manifest = path.join(base, 'deployment.manifest');
  copyTree({ src, dst: deployment, policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: manifest });
  // Runtime objects that appeared in the running tree: neither copy keeps them.
  for (const s of ['usr/lib/runtime.sock', 'etc/control.sock']) {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(path.join(deployment, s), resolve));
    server.unref();
  }
});

afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

/** The copy that looks at every entry (with its manifest), and the trusting one (its manifest from the deployment's). */
function bothCopies(name: string, from = deployment, fromManifest = manifest, p = policy): { looked: string; trusted: string; lookedManifest: string; trustedManifest: string; r: CopyResult; snap: SnapshotManifestResult; skipped: string[] } {
  const looked = path.join(base, `${name}-looked`);
  const trusted = path.join(base, `${name}-trusted`);
  fs.mkdirSync(looked);
  fs.mkdirSync(trusted);
  const lookedManifest = `${looked}.manifest`;
  const trustedManifest = `${trusted}.manifest`;
  const skippedLooked: string[] = [];
  const skipped: string[] = [];
  copyTree({ src: from, dst: looked, policy: p, srcManifest: fromManifest, manifestOut: lookedManifest, onSkip: (rel, why) => skippedLooked.push(`${rel}: ${why}`) });
  const r = copyTree({ src: from, dst: trusted, policy: p, srcManifest: fromManifest, trust: true, onSkip: (rel, why) => skipped.push(`${rel}: ${why}`) });
  expect(skipped).toEqual(skippedLooked);
  const snap = snapshotManifest({ tree: trusted, base: fromManifest, baseTree: from, out: trustedManifest, trust: p.hardlinkPrefixes, events: [] }, hooks);
  return { looked, trusted, lookedManifest, trustedManifest, r, snap, skipped };
}

describe('a copy that trusts the manifest under the hardlink prefixes', () => {
  it('makes the tree and (with snapshotManifest) the manifest that the copy looking at every entry makes', () => {
    const c = bothCopies('same');
    expect(c.skipped).toEqual(['etc/control.sock: socket', 'usr/lib/runtime.sock: socket']);
    expect(describeTree(c.trusted)).toBe(describeTree(c.looked));
    expect(dump(c.trusted)).toBe(dump(c.looked));
    expect(dump(c.trusted)).toContain('security.capability=');
    expect(dump(c.trusted)).toContain('system.posix_acl_default=');
    // Entry for entry, hashes and mtimes included (a copy's mtime is its source's, to the millisecond);
    // inode and ctime are the copy's own.
    expect(keylessEntries(c.trustedManifest)).toEqual(keylessEntries(c.lookedManifest));
    expect(keylessEntries(c.trustedManifest)).toEqual(keylessEntries(manifest));
    expect(verifyTree(c.trusted, c.trustedManifest)).toEqual([]);
    // usr/ files are the deployment's inodes; the rest are new ones, names of one inode kept together.
    for (const p of ['usr/bin/ping', 'usr/bin/su', 'usr/bin/su-again', 'usr/lib/pkg3/f3']) expect(ino(c.trusted, p), p).toBe(ino(deployment, p));
    for (const p of ['etc/os-release', 'etc/ssh/host_key', 'usr/lib/fifo', 'usr/share/link']) expect(ino(c.trusted, p), p).not.toBe(ino(deployment, p));
    expect(ino(c.trusted, 'etc/ssh/host_key.link')).toBe(ino(c.trusted, 'etc/ssh/host_key'));
    // ping, su, su-again, key, the latin-1 file, the file in the latin-1 directory, the 200 package files.
    expect(c.r).toMatchObject({ hardlinked: 206, hashed: 0 });
    // The copies of the deployment's unchanged files take their hashes from its manifest, but
    // etc/ssh/host_key: its second name was linked after its line was written (a new ctime).
    expect(c.snap.hashed).toBe(1);
  });

  it('hashes again a file of the base tree that changed since its manifest, even keeping size and mtime', () => {
    const from = path.join(base, 'edited');
    const fromManifest = `${from}.manifest`;
    fs.mkdirSync(from);
    copyTree({ src: deployment, dst: from, policy, srcManifest: manifest, manifestOut: fromManifest });
    const f = path.join(from, 'etc/os-release');
    const st = fs.statSync(f);
    fs.writeFileSync(f, 'ID=tset\n');
    fs.utimesSync(f, st.atime, st.mtime);
    const c = bothCopies('edited', from, fromManifest);
    expect(c.snap.hashed).toBe(2); // os-release and etc/ssh/host_key (see above)
    const drift = verifyTree(c.trusted, c.trustedManifest);
    expect(drift).toEqual([]);
    expect(keylessEntries(c.trustedManifest)).toEqual(keylessEntries(c.lookedManifest));
  });

  it('gives the same delta, changed entries and manifest as patchManifest after the same change set', () => {
    const c = bothCopies('delta');
    const apply = (tree: string): TouchEvent[] => {
      const events: TouchEvent[] = [];
      const root = new RootFs(tree, { durability: 'deferred', onTouch: (e) => events.push(e) });
      root.writeFile('/etc/motd', Buffer.from('hello\n'), { mode: 0o644 });
      root.writeFile('/usr/bin/ping', Buffer.from('#!/bin/false\n'), { mode: 0o755 });
      root.remove('/usr/lib/pkg4', { recursive: true });
      root.remove('/etc/ssh/host_key.link');
      root.mkdir('/usr/lib/pkg-new', { mode: 0o755 });
      root.writeFile('/usr/lib/pkg-new/data', Buffer.from('new\n'));
      root.symlink('/etc/alias', 'os-release');
      return events;
    };
    // The looking copy: its pre-manifest patched (as a stage without trust did).
    const lookedEvents = apply(c.looked);
    const patched = patchManifest(c.looked, c.lookedManifest, `${c.looked}.after`, lookedEvents);
    const trustedEvents = apply(c.trusted);
    const snap = snapshotManifest({ tree: c.trusted, base: manifest, out: `${c.trusted}.after`, trust: ['usr'], events: trustedEvents }, hooks);
    // (The files the change set wrote carry the time they were written: mtimes aside.)
    const semantics = (r: typeof patched): object => ({ delta: r.delta, changed: r.changed.map(keyless), removed: r.removed, entries: r.entries });
    expect(semantics(snap)).toEqual(semantics(patched));
    expect(patched.delta).toContain('usr/bin/ping');
    expect(patched.removed).toEqual(['etc/ssh/host_key.link', 'usr/lib/pkg4']);
    expect(keylessEntries(`${c.trusted}.after`)).toEqual(keylessEntries(`${c.looked}.after`));
    expect(verifyTree(c.trusted, `${c.trusted}.after`)).toEqual([]);
  });

  it.each([2, 3])('split in %i parts: the same tree as one trusting copy, no manifest written', async (parts) => {
    const one = path.join(base, `split-${parts}-one`);
    const split = path.join(base, `split-${parts}`);
    fs.mkdirSync(one);
    fs.mkdirSync(split);
    const r1 = copyTree({ src: deployment, dst: one, policy, srcManifest: manifest, trust: true });
    const progress: number[] = [];
    const { result, manifests } = await copyTreeSplit({ src: deployment, dst: split, policy, srcManifest: manifest, trust: true, total: r1.entries }, parts, { onProgress: (p: { done: number }) => progress.push(p.done) });
    expect(manifests).toEqual([]);
    expect(fs.readdirSync(base).filter((n) => n.startsWith(`split-${parts}.`))).toEqual([]);
    expect(result).toMatchObject({ entries: r1.entries, hardlinked: r1.hardlinked });
    expect(progress.at(-1)).toBe(r1.entries);
    expect(describeTree(split)).toBe(describeTree(one));
    expect(dump(split)).toBe(dump(one));
    expect(ino(split, 'etc/ssh/host_key.link')).toBe(ino(split, 'etc/ssh/host_key'));
    const m = `${split}.manifest`;
    snapshotManifest({ tree: split, base: manifest, out: m, trust: ['usr'], events: [] }, hooks);
    expect(keylessEntries(m)).toEqual(keylessEntries(manifest));
  });

  it('copies a file whose link is refused with EMLINK (its inode has the most links the filesystem allows), faithfully', () => {
    const src = path.join(base, 'emlink-src');
    fs.mkdirSync(path.join(src, 'usr/lib'), { recursive: true });
    const full = path.join(src, 'usr/lib/full');
    fs.writeFileSync(full, 'many names\n', { mode: 0o640 });
    run('setfattr', '-n', 'user.kept', '-v', 'yes', full);
    fs.writeFileSync(path.join(src, 'usr/lib/plain'), 'one name\n');
    const m = path.join(base, 'emlink.manifest');
    copyTree({ src, dst: fs.mkdtempSync(path.join(base, 'emlink-first-')), policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: m });
    // The other names live outside the tree (the walk never sees them): link until the filesystem refuses.
    const names = path.join(base, 'emlink-names');
    fs.mkdirSync(names);
    let refused: string | null = null;
    for (let i = 0; i < 70_000 && refused === null; i++) {
      try {
        fs.linkSync(full, path.join(names, String(i)));
      } catch (err) {
        refused = (err as NodeJS.ErrnoException).code ?? 'unknown';
      }
    }
    expect(refused, 'the filesystem of the temp dir limits links per inode').toBe('EMLINK');
    const dst = path.join(base, 'emlink-dst');
    fs.mkdirSync(dst);
    try {
      const r = copyTree({ src, dst, policy, srcManifest: m, trust: true });
      expect(r).toMatchObject({ hardlinked: 1, copied: 1 });
      expect(ino(dst, 'usr/lib/full')).not.toBe(ino(src, 'usr/lib/full'));
      expect(ino(dst, 'usr/lib/plain')).toBe(ino(src, 'usr/lib/plain'));
      expect(fs.readFileSync(path.join(dst, 'usr/lib/full'), 'utf8')).toBe('many names\n');
      expect(dump(dst)).toBe(dump(src));
      expect(describeTree(dst)).toBe(describeTree(src));
      const out = path.join(base, 'emlink-dst.manifest');
      snapshotManifest({ tree: dst, base: m, out, trust: ['usr'], events: [] }, hooks);
      expect(verifyTree(dst, out)).toEqual([]);
    } finally {
      fs.rmSync(names, { recursive: true, force: true });
    }
  }, 120_000);

  it('takes either a manifest to write or trust, not both or neither (USAGE)', () => {
    const dst = fs.mkdtempSync(path.join(base, 'usage-'));
    expect(() => copyTree({ src: deployment, dst, policy, srcManifest: manifest, trust: true, manifestOut: `${dst}.m` })).toThrow(expect.objectContaining({ code: 'USAGE' }));
    expect(() => copyTree({ src: deployment, dst, policy, srcManifest: manifest })).toThrow(expect.objectContaining({ code: 'USAGE' }));
    expect(fs.readdirSync(dst)).toEqual([]);
  });

  it('treats usr/ that is a symlink, or missing, as any other entry (nothing to trust)', () => {
    const src = path.join(base, 'usr-link-src');
    fs.mkdirSync(path.join(src, 'usr.real/bin'), { recursive: true });
    fs.writeFileSync(path.join(src, 'usr.real/bin/sh'), '#!\n', { mode: 0o755 });
    fs.symlinkSync('usr.real', path.join(src, 'usr'));
    fs.mkdirSync(path.join(src, 'etc'));
    fs.writeFileSync(path.join(src, 'etc/hostname'), 'node\n');
    const m = path.join(base, 'usr-link.manifest');
    copyTree({ src, dst: fs.mkdtempSync(path.join(base, 'usr-link-first-')), policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: m });
    const c = bothCopies('usr-link', src, m);
    expect(fs.lstatSync(path.join(c.trusted, 'usr')).isSymbolicLink()).toBe(true);
    expect(ino(c.trusted, 'usr.real/bin/sh')).not.toBe(ino(src, 'usr.real/bin/sh')); // not under usr/: copied
    expect(describeTree(c.trusted)).toBe(describeTree(c.looked));
    expect(keylessEntries(c.trustedManifest)).toEqual(keylessEntries(c.lookedManifest));

    fs.rmSync(path.join(src, 'usr'));
    fs.rmSync(path.join(src, 'usr.real'), { recursive: true });
    const m2 = path.join(base, 'no-usr.manifest');
    copyTree({ src, dst: fs.mkdtempSync(path.join(base, 'no-usr-first-')), policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: m2 });
    const c2 = bothCopies('no-usr', src, m2);
    expect(describeTree(c2.trusted)).toBe(describeTree(c2.looked));
    expect(keylessEntries(c2.trustedManifest)).toEqual(keylessEntries(c2.lookedManifest));
  });
});

const noTmpfs = whyNoTmpfs();
if (noTmpfs) console.warn(`SKIPPED the EXDEV case of test/fs/trees/copy-tree-trusted.test.ts (it copies onto a tmpfs mount): ${noTmpfs}`);

describe('a trusting copy onto another filesystem (EXDEV)', () => {
  let mnt: string | undefined;
  afterEach(() => {
    if (mnt === undefined) return;
    execFileSync('umount', [mnt]);
    fs.rmdirSync(mnt);
    mnt = undefined;
  });

  it.skipIf(noTmpfs !== null)('copies every file a link cannot reach, with its mode, owner, times and capabilities', () => {
    const src = path.join(base, 'exdev-src');
    fs.mkdirSync(path.join(src, 'usr/bin'), { recursive: true });
    fs.writeFileSync(path.join(src, 'usr/bin/ping'), '#!/bin/true\n', { mode: 0o755 });
    run('setcap', 'cap_net_raw+ep', path.join(src, 'usr/bin/ping'));
    fs.writeFileSync(path.join(src, 'usr/bin/key'), 'k\n', { mode: 0o600 });
    fs.chownSync(path.join(src, 'usr/bin/key'), 7, 8);
    fs.utimesSync(path.join(src, 'usr/bin/key'), 1_000_000.5, 1_000_000.5);
    const m = path.join(base, 'exdev.manifest');
    copyTree({ src, dst: fs.mkdtempSync(path.join(base, 'exdev-first-')), policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: m });
    mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-exdev-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt]);
    const r = copyTree({ src, dst: mnt, policy, srcManifest: m, trust: true });
    expect(r).toMatchObject({ hardlinked: 0, copied: 2 });
    expect(run('getcap', path.join(mnt, 'usr/bin/ping'))).toContain('cap_net_raw=ep');
    expect(describeTree(mnt)).toBe(describeTree(src));
    const out = path.join(base, 'exdev-dst.manifest');
    snapshotManifest({ tree: mnt, base: m, out, trust: ['usr'], events: [] }, hooks);
    expect(verifyTree(mnt, out)).toEqual([]);
    expect(keylessEntries(out)).toEqual(keylessEntries(m));
  });
});
