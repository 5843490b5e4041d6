/**
 * A stage's manifest as a link to its base's manifest file plus an overlay of what
 * differs (src/fs/manifests/linked-manifest.ts, snapshotManifest's `link`): read back, it
 * is the manifest snapshotManifest writes whole, with the same delta, entries and bytes,
 * whether the base has an overlay of its own (composed) or not; its digest is the one
 * manifestDigest computes; past the bound, or where link(2) is refused (another
 * filesystem), the manifest is written whole; nothing writes a linked manifest in place.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { copyTree } from '../../../src/fs/trees/copy-tree.js';
import { RootFs, type TouchEvent } from '../../../src/fs/trees/root-fs.js';
import { snapshotManifest, type SnapshotManifestArgs } from '../../../src/fs/manifests/snapshot-manifest.js';
import { patchOverlay } from '../../../src/fs/manifests/patch-manifest.js';
import { ManifestWriter, readManifest } from '../../../src/fs/manifests/manifest.js';
import { manifestDigest, overlayFile, readOverlay } from '../../../src/fs/manifests/manifest-overlay.js';
import { verifyTree } from '../../../src/fs/manifests/verify-tree.js';
import { hashFile } from '../../../src/fs/core/hash.js';
import { noFaults } from '../../../src/fs/core/faults.js';
import { mountTmpfs } from '../../helpers/mounts.js';

const hooks = { faults: noFaults, checkAbort: () => {}, skip: () => {} };
const policy = { hardlinkPrefixes: ['usr'], mode: 'reflink' as const };
const top = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-linked-'));
afterAll(() => fs.rmSync(top, { recursive: true, force: true }));

let dir: string;
let n = 0;
beforeEach(() => {
  dir = path.join(top, String(n++));
  fs.mkdirSync(dir);
});

/** A deployment (tree and manifest, as init makes them); `finalized`: its etc/ changed afterwards and recorded as its overlay. */
function deployment(finalized: boolean): { tree: string; manifest: string; digest: string } {
  const src = path.join(dir, 'src');
  for (const d of ['usr/bin', 'usr/lib/a', 'usr/lib/b', 'etc/conf.d']) fs.mkdirSync(path.join(src, d), { recursive: true });
  for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(src, `usr/lib/${i % 2 ? 'a' : 'b'}/f${i}`), `lib ${i}\n`);
  fs.writeFileSync(path.join(src, 'usr/bin/tool'), 'tool v1\n');
  for (const f of ['etc/hosts', 'etc/conf.d/a', 'etc/conf.d/b', 'etc/gone']) fs.writeFileSync(path.join(src, f), `${f}\n`);
  fs.symlinkSync('usr/bin', path.join(src, 'bin'));
  const tree = path.join(dir, 'deployment');
  fs.mkdirSync(tree);
  const manifest = path.join(dir, 'manifest.ndjson');
  copyTree({ src, dst: tree, policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: manifest });
  const fileSha = hashFile(manifest);
  if (!finalized) return { tree, manifest, digest: fileSha };
  // As finalize's merge records it: the base file untouched, the changes in its overlay.
  const events: TouchEvent[] = [];
  const root = new RootFs(tree, { onTouch: (e) => events.push(e) });
  root.writeFile('/etc/hosts', Buffer.from('merged hosts\n'));
  root.writeFile('/etc/conf.d/local', Buffer.from('a local file\n'));
  root.remove('/etc/conf.d/b');
  const o = patchOverlay(tree, manifest, events, fileSha);
  fs.writeFileSync(overlayFile(manifest), o.text);
  return { tree, manifest, digest: o.digest };
}

/** The stage's tree (a trusting copy of the deployment) with a change set applied; its events. */
function staged(base: { tree: string; manifest: string }, change: (root: RootFs) => void): { tree: string; events: TouchEvent[] } {
  const tree = path.join(dir, 'staged');
  fs.mkdirSync(tree);
  copyTree({ src: base.tree, dst: tree, policy, srcManifest: base.manifest, trust: true });
  const events: TouchEvent[] = [];
  change(new RootFs(tree, { onTouch: (e) => events.push(e), durability: 'deferred' }));
  return { tree, events };
}

const update = (root: RootFs): void => {
  root.writeFile('/usr/bin/tool', Buffer.from('tool v2\n'));
  root.writeFile('/usr/bin/new', Buffer.from('new\n'));
  root.remove('/usr/lib/b', { recursive: true });
  root.mkdir('/usr/lib/c', { mode: 0o755 });
  root.writeFile('/usr/lib/c/x', Buffer.from('x\n'));
  root.writeFile('/etc/conf.d/a', Buffer.from('from the update\n'));
  root.remove('/etc/gone');
};

/** snapshotManifest whole and linked, on the same staged tree. */
function both(base: { tree: string; manifest: string; digest: string }, args: Pick<SnapshotManifestArgs, 'tree' | 'events'>, entries = 100) {
  const common = { ...args, base: base.manifest, baseTree: base.tree, trust: ['usr'] };
  const whole = snapshotManifest({ ...common, out: path.join(dir, 'whole.ndjson') }, hooks);
  const linked = snapshotManifest({ ...common, out: path.join(dir, 'linked.ndjson'), link: { digest: base.digest, entries } }, hooks);
  return { whole, linked, wholeFile: path.join(dir, 'whole.ndjson'), linkedFile: path.join(dir, 'linked.ndjson') };
}

const result = (r: ReturnType<typeof snapshotManifest>) => ({ delta: r.delta, changed: r.changed, removed: r.removed, entries: r.entries, bytes: r.bytes });

describe('a stage manifest linked to its base and an overlay', () => {
  for (const finalized of [false, true]) {
    it(`reads as the manifest written whole, with its delta and digest (base ${finalized ? 'with' : 'without'} an overlay of its own)`, () => {
      const base = deployment(finalized);
      const baseText = fs.readFileSync(base.manifest, 'utf8');
      const s = staged(base, update);
      const r = both(base, s);
      expect(r.whole.linked).toBe(false);
      expect(r.linked.linked).toBe(true);
      expect([...readManifest(r.linkedFile)]).toEqual([...readManifest(r.wholeFile)]);
      expect(result(r.linked)).toEqual(result(r.whole));
      expect(r.whole.sha256).toBe(hashFile(r.wholeFile));
      expect(r.linked.sha256).toBe(manifestDigest(r.linkedFile));
      expect(verifyTree(s.tree, r.linkedFile)).toEqual([]);
      // One file, two names; the base's own manifest (and overlay) as they were.
      expect(fs.statSync(r.linkedFile).ino).toBe(fs.statSync(base.manifest).ino);
      expect(fs.statSync(base.manifest).nlink).toBe(2);
      expect(fs.readFileSync(base.manifest, 'utf8')).toBe(baseText);
      expect(manifestDigest(base.manifest)).toBe(base.digest);
      // The overlay is relative to the base FILE: the base's overlay composed in.
      const o = readOverlay(r.linkedFile)!;
      expect(o.base).toBe(hashFile(base.manifest));
      if (finalized) expect(o.dirty.has('etc/conf.d/local')).toBe(true);
      expect(o.dirty.has('usr/lib/a/f1')).toBe(false);
      // Removing the base's name leaves the stage's manifest whole (and the other way round).
      fs.rmSync(base.manifest);
      fs.rmSync(overlayFile(base.manifest), { force: true });
      expect(manifestDigest(r.linkedFile)).toBe(r.linked.sha256);
      expect(fs.statSync(r.linkedFile).nlink).toBe(1);
    });
  }

  it('past its bound the manifest is written whole', () => {
    const base = deployment(false);
    const s = staged(base, (root) => {
      for (let i = 0; i < 1100; i++) root.writeFile(`/usr/lib/a/many${i}`, Buffer.from(`${i}\n`));
    });
    const r = both(base, s);
    expect(r.linked.linked).toBe(false);
    expect(fs.existsSync(overlayFile(r.linkedFile))).toBe(false);
    expect(fs.statSync(r.linkedFile).nlink).toBe(1);
    expect(fs.readFileSync(r.linkedFile, 'utf8')).toBe(fs.readFileSync(r.wholeFile, 'utf8'));
    expect(r.linked.sha256).toBe(hashFile(r.linkedFile));
    expect(result(r.linked)).toEqual(result(r.whole));
  });

  it('without the base digest, or where link(2) is refused (another filesystem), the manifest is written whole', () => {
    const base = deployment(false);
    const s = staged(base, update);
    const noDigest = snapshotManifest({ tree: s.tree, events: s.events, base: base.manifest, baseTree: base.tree, trust: ['usr'], out: path.join(dir, 'nodigest.ndjson'), link: { digest: null, entries: 100 } }, hooks);
    expect(noDigest.linked).toBe(false);
    expect(noDigest.sha256).toBe(hashFile(path.join(dir, 'nodigest.ndjson')));
    // Another filesystem for certain: a tmpfs of its own (fails, naming why, where none can be mounted).
    const other = mountTmpfs(dir);
    try {
      expect(fs.statSync(other.mnt).dev).not.toBe(fs.statSync(base.manifest).dev);
      const out = path.join(other.mnt, 'm.ndjson');
      const r = snapshotManifest({ tree: s.tree, events: s.events, base: base.manifest, baseTree: base.tree, trust: ['usr'], out, link: { digest: base.digest, entries: 100 } }, hooks);
      expect(r.linked).toBe(false);
      expect(r.sha256).toBe(hashFile(out));
      expect(verifyTree(s.tree, out)).toEqual([]);
      expect(fs.statSync(out).nlink).toBe(1);
      expect(fs.existsSync(overlayFile(out))).toBe(false);
    } finally {
      other.cleanup();
    }
  });

  it('a manifest file with a second link is never written in place', () => {
    const a = path.join(dir, 'a.ndjson');
    const w = new ManifestWriter(a);
    w.write({ p: 'etc', t: 'd', m: 0o755, u: 0, g: 0 });
    w.close(false);
    const text = fs.readFileSync(a, 'utf8');
    fs.linkSync(a, path.join(dir, 'b.ndjson'));
    expect(() => new ManifestWriter(path.join(dir, 'b.ndjson'))).toThrow(/another deployment's manifest is the same file/);
    expect(fs.readFileSync(a, 'utf8')).toBe(text);
  });
});
