/**
 * The one tree walker (src/fs/core/walk.ts) and every module that walks a tree through it,
 * each given a tree with latin-1 (not UTF-8) names: "caf\xe9" as a directory, a file in it
 * and a file beside it. Each user must see, copy, record or compare those names byte for
 * byte (a name read as a string turns \xe9 into U+FFFD, and the entry into ENOENT).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { walk, walkEntries, walkTree } from '../../../src/fs/core/walk.js';
import { readTree } from '../../../src/fs/trees/read-tree.js';
import { copyTree } from '../../../src/fs/trees/copy-tree.js';
import { copyOut } from '../../../src/fs/trees/copy-entry.js';
import { snapshotManifest } from '../../../src/fs/manifests/snapshot-manifest.js';
import { verifyTree } from '../../../src/fs/manifests/verify-tree.js';
import { readManifest } from '../../../src/fs/manifests/manifest.js';
import { noFaults } from '../../../src/fs/core/faults.js';
import { hashFile } from '../../../src/fs/core/hash.js';
import { hashTree } from '../../../src/testing/index.js';

const LATIN1 = Buffer.from('caf\xe9', 'latin1');
/** The tree path string of the latin-1 name (its byte escaped, see names.ts). */
const ESC = 'caf\udce9';
const hooks = { faults: noFaults, checkAbort: () => {}, skip: () => {} };

let base: string;
/** A host path with the latin-1 name's bytes: `at(dir, 'etc/', L, '/', L)`. */
const at = (...parts: (string | Buffer)[]): Buffer => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
const L = LATIN1;

/** etc/caf\xe9/caf\xe9 (a file in a latin-1 directory), etc/caf\xe9.conf, usr/bin/caf\xe9, usr/lib/ok. */
function makeTree(dir: string): string {
  fs.mkdirSync(path.join(dir, 'etc'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'usr/bin'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'usr/lib'), { recursive: true });
  fs.mkdirSync(at(dir, '/etc/', L));
  fs.writeFileSync(at(dir, '/etc/', L, '/', L), 'inner\n');
  fs.writeFileSync(at(dir, '/etc/', L, '.conf'), 'beside\n');
  fs.writeFileSync(at(dir, '/usr/bin/', L), 'tool\n');
  fs.writeFileSync(path.join(dir, 'usr/lib/ok'), 'ok\n');
  return dir;
}
const WANT = ['etc', `etc/${ESC}`, `etc/${ESC}/${ESC}`, `etc/${ESC}.conf`, 'usr', 'usr/bin', `usr/bin/${ESC}`, 'usr/lib', 'usr/lib/ok'];

let tree: string;
beforeAll(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-walk-latin1-'));
  tree = makeTree(path.join(base, 'tree'));
});
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

describe('walk', () => {
  it('visits every entry in manifest order with its name as bytes, leaves after children, skips on request', () => {
    const seen: string[] = [];
    for (const s of walk(tree)) {
      seen.push(s.leave ? `leave ${s.rel}` : s.rel);
      if (!s.leave) expect(fs.lstatSync(s.host).isDirectory(), s.rel).toBe(s.entry.dirent.isDirectory());
      if (s.rel === 'usr/bin' && !s.leave) s.skip();
    }
    expect(seen).toEqual(['etc', `etc/${ESC}`, `etc/${ESC}/${ESC}`, `leave etc/${ESC}`, `etc/${ESC}.conf`, 'leave etc', 'usr', 'usr/bin', 'usr/lib', 'usr/lib/ok', 'leave usr/lib', 'leave usr']);
  });

  it('walks a range, and walkEntries and walkTree are the same walk', () => {
    const ranged = [...walk(tree, { range: { lo: `etc/${ESC}/${ESC}`, hi: 'usr/lib' } })].filter((s) => !s.leave).map((s) => s.rel);
    expect(ranged).toEqual([`etc/${ESC}/${ESC}`, `etc/${ESC}.conf`, 'usr', 'usr/bin', `usr/bin/${ESC}`]);
    const entries: string[] = [];
    walkEntries(tree, { enter: (rel, _h, e) => (entries.push(rel), e.dirent.isDirectory()) });
    const stats: string[] = [];
    walkTree(tree, { enter: (rel, host, st) => stats.push(`${rel} ${st.isFile() ? fs.readFileSync(host, 'utf8').trim() : 'dir'}`) });
    expect(entries).toEqual(WANT);
    expect(stats).toContain(`etc/${ESC}/${ESC} inner`);
    expect(stats.map((s) => s.split(' ')[0])).toEqual(WANT);
  });
});

describe('every walker user keeps a latin-1 name byte for byte', () => {
  it('readTree (a directory source) yields it with a host path that reads', () => {
    const got = [...readTree(tree)].map((e) => `${e.rel} ${e.kind}${e.kind === 'file' ? ' ' + fs.readFileSync(e.host, 'utf8').trim() : ''}`);
    expect(got).toEqual(['etc dir', `etc/${ESC} dir`, `etc/${ESC}/${ESC} file inner`, `etc/${ESC}.conf file beside`, 'usr dir', 'usr/bin dir', `usr/bin/${ESC} file tool`, 'usr/lib dir', 'usr/lib/ok file ok']);
  });

  it('copyTree copies it and records it, snapshotManifest records it as the copy does, verifyTree and hashTree read it', () => {
    const copy = path.join(base, 'copy');
    fs.mkdirSync(copy);
    const manifest = `${copy}.manifest`;
    copyTree({ src: tree, dst: copy, policy: { hardlinkPrefixes: ['usr'], mode: 'copy' }, manifestOut: manifest });
    expect(fs.readFileSync(at(copy, '/etc/', L, '/', L), 'utf8')).toBe('inner\n');
    expect(fs.statSync(at(copy, '/usr/bin/', L)).ino).toBe(fs.statSync(at(tree, '/usr/bin/', L)).ino); // linked
    const lines = [...readManifest(manifest)];
    expect(lines.map((e) => e.p)).toEqual(WANT);
    expect(lines.find((e) => e.p === `etc/${ESC}/${ESC}`)?.h).toBe(hashFile(at(tree, '/etc/', L, '/', L)));
    expect(verifyTree(copy, manifest)).toEqual([]);
    expect(hashTree(copy)).toBe(hashTree(tree));

    // The trusting copy (usr/ linked on readdir's word) and the snapshot walk of the rest.
    const trusted = path.join(base, 'trusted');
    fs.mkdirSync(trusted);
    copyTree({ src: copy, dst: trusted, policy: { hardlinkPrefixes: ['usr'], mode: 'copy' }, srcManifest: manifest, trust: true });
    const snap = `${trusted}.manifest`;
    const r = snapshotManifest({ tree: trusted, base: manifest, baseTree: copy, out: snap, trust: ['usr'], events: [] }, hooks);
    expect([...readManifest(snap)].map((e) => [e.p, e.h])).toEqual(lines.map((e) => [e.p, e.h]));
    expect(r.walked).toBe(5); // etc, its latin-1 directory, the two latin-1 files, usr itself; nothing below usr/
    expect(verifyTree(trusted, snap)).toEqual([]);

    // A change to the latin-1 file is drift named by its path, and changes the tree's hash.
    fs.writeFileSync(at(trusted, '/etc/', L, '/', L), 'changed\n');
    expect(verifyTree(trusted, snap).map((d) => `${d.kind} ${d.path}`)).toEqual([`content etc/${ESC}/${ESC}`]);
    expect(hashTree(trusted)).not.toBe(hashTree(tree));
    // A latin-1 name the manifest lacks is extra.
    fs.writeFileSync(at(trusted, '/etc/', L, '.new'), 'new\n');
    expect(verifyTree(trusted, snap).map((d) => `${d.kind} ${d.path}`)).toContain(`extra etc/${ESC}.new`);
  });

  it('copyOut (recursive) copies a latin-1 directory with its latin-1 children', () => {
    const dst = path.join(base, 'kept', 'etc');
    expect(copyOut(path.join(tree, 'etc'), dst, { recursive: true })).toBe(true);
    expect(fs.readFileSync(at(dst, '/', L, '/', L), 'utf8')).toBe('inner\n');
    expect(fs.readFileSync(at(dst, '/', L, '.conf'), 'utf8')).toBe('beside\n');
    expect(hashTree(dst)).toBe(hashTree(path.join(tree, 'etc')));
  });
});

