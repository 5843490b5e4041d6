/**
 * The summary of a linked manifest file (src/fs/manifests/manifest-summary.ts): the pass
 * that links a base file writes the file's totals beside the new manifest, the next pass
 * over that file passes its unchanged runs over uncounted (ManifestCursor.skipRun) and
 * gets the same entries, bytes and delta as a pass that counts them; a summary whose key
 * is not the file's (another sha256, another size: a manifest rewritten since), or that
 * is torn, is not trusted: the runs are counted. skipRun itself passes over exactly the
 * run passRun counts, on manifests larger than the cursor's buffer, with an overlay
 * stopping the runs every few lines.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { copyTree } from '../../../src/fs/trees/copy-tree.js';
import { RootFs, type TouchEvent } from '../../../src/fs/trees/root-fs.js';
import { snapshotManifest } from '../../../src/fs/manifests/snapshot-manifest.js';
import { ManifestWriter, readManifest } from '../../../src/fs/manifests/manifest.js';
import { ManifestCursor } from '../../../src/fs/manifests/manifest-cursor.js';
import { formatOverlay, overlayFile } from '../../../src/fs/manifests/manifest-overlay.js';
import { readSummary, summaryFile } from '../../../src/fs/manifests/manifest-summary.js';
import type { ManifestEntry } from '../../../src/fs/manifests/manifest-line.js';
import { hashFile } from '../../../src/fs/core/hash.js';
import { noFaults } from '../../../src/fs/core/faults.js';

const hooks = { faults: noFaults, checkAbort: () => {}, skip: () => {} };
const policy = { hardlinkPrefixes: ['usr'], mode: 'reflink' as const };
const top = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-summary-'));
afterAll(() => fs.rmSync(top, { recursive: true, force: true }));

let dir: string;
let n = 0;
beforeEach(() => {
  dir = path.join(top, String(n++));
  fs.mkdirSync(dir);
});

/** A deployment as init makes it: 300 files under usr/ in 30 directories, a few in etc/. */
function deployment(): { tree: string; manifest: string; digest: string } {
  const src = path.join(dir, 'src');
  for (let d = 0; d < 30; d++) {
    fs.mkdirSync(path.join(src, `usr/share/d${d}`), { recursive: true });
    for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(src, `usr/share/d${d}/f${i}`), 'x'.repeat(d * 10 + i + 1));
  }
  fs.mkdirSync(path.join(src, 'etc'));
  fs.writeFileSync(path.join(src, 'etc/hosts'), 'hosts\n');
  const tree = path.join(dir, 'deployment');
  fs.mkdirSync(tree);
  const manifest = path.join(dir, 'manifest.ndjson');
  copyTree({ src, dst: tree, policy: { hardlinkPrefixes: [], mode: 'copy' }, manifestOut: manifest });
  return { tree, manifest, digest: hashFile(manifest) };
}

/** A stage over `base`: a trusting copy with a change set applied, its manifest linked (snapshotManifest with `link`). */
function stageOver(base: { tree: string; manifest: string; digest: string }, name: string, change: (root: RootFs) => void) {
  const tree = path.join(dir, `${name}-tree`);
  fs.mkdirSync(tree);
  copyTree({ src: base.tree, dst: tree, policy, srcManifest: base.manifest, trust: true });
  const events: TouchEvent[] = [];
  change(new RootFs(tree, { onTouch: (e) => events.push(e), durability: 'deferred' }));
  const out = path.join(dir, `${name}.ndjson`);
  const r = snapshotManifest({ tree, events, base: base.manifest, baseTree: base.tree, out, trust: ['usr'], link: { digest: base.digest, entries: 1000 } }, hooks);
  return { tree, manifest: out, digest: r.sha256!, r };
}

const counted = (file: string) => {
  let entries = 0;
  let bytes = 0;
  for (const e of readManifest(file)) {
    entries += 1;
    if (e.t === 'f') bytes += e.s ?? 0;
  }
  return { entries, bytes };
};
/** What a pass says (the changed entries without their inode and times: each stage has its own tree). */
const result = (r: ReturnType<typeof snapshotManifest>) => ({ delta: r.delta, changed: r.changed.map((e) => [e.p, e.t, e.s, e.h]), removed: r.removed, entries: r.entries, bytes: r.bytes, same: r.same });

const first = (root: RootFs): void => {
  root.writeFile('/usr/share/d3/f1', Buffer.from('changed\n'));
  root.writeFile('/usr/share/d17/new', Buffer.from('new file\n'));
  root.remove('/usr/share/d20', { recursive: true });
};
const second = (root: RootFs): void => {
  root.writeFile('/usr/share/d5/f5', Buffer.from('changed again, longer than before\n'));
  root.writeFile('/usr/share/d29/new', Buffer.from('another\n'));
  root.remove('/usr/share/d3/f2');
};

describe('the summary of a linked manifest file', () => {
  it('is written by the pass that links the file, and the next pass uses it: the same entries, bytes and delta as counting', () => {
    const base = deployment();
    const a = stageOver(base, 'a', first);
    expect(a.r.linked).toBe(true);
    expect(a.r.summarized).toBe(true);
    // The summary is the FILE's (the base's lines, not its overlay's), keyed by its sha256 and size.
    const fileLines = fs.readFileSync(base.manifest, 'utf8').split('\n').filter((l) => l !== '').length;
    const size = fs.statSync(base.manifest).size;
    expect(readSummary(a.manifest, hashFile(base.manifest), size)).toEqual({ lines: fileLines, bytes: counted(base.manifest).bytes });
    expect({ entries: a.r.entries, bytes: a.r.bytes }).toEqual(counted(a.manifest));

    // The second stage over `a` trusts a's summary; the same stage with the summary taken away counts.
    const b = stageOver(a, 'b', second);
    expect(b.r.summarized).toBe(true);
    expect(fs.readFileSync(summaryFile(b.manifest), 'utf8')).toBe(fs.readFileSync(summaryFile(a.manifest), 'utf8'));
    expect({ entries: b.r.entries, bytes: b.r.bytes }).toEqual(counted(b.manifest));
    fs.rmSync(summaryFile(a.manifest));
    const c = stageOver(a, 'c', second);
    expect(result(c.r)).toEqual(result(b.r));
    const shape = (f: string) => [...readManifest(f)].map((e) => [e.p, e.t, e.s, e.h]);
    expect(shape(c.manifest)).toEqual(shape(b.manifest));
  });

  it('a summary whose key is not the file (another sha256 or size) or that is torn is not trusted: the runs are counted', () => {
    const base = deployment();
    const a = stageOver(base, 'a', first);
    const key = { sha256: hashFile(base.manifest), size: fs.statSync(base.manifest).size };
    const good = fs.readFileSync(summaryFile(a.manifest), 'utf8');
    const truth = stageOver(a, 'truth', second).r;
    // A summary that lies about the totals under each wrong key: were it trusted, the counts would be off by its lie.
    const lie = (k: { sha256: string; size: number }) => `${JSON.stringify({ summary: 1, sha256: k.sha256, size: k.size, lines: 5, bytes: 7 })}\n`;
    const stale = [lie({ ...key, sha256: 'f'.repeat(64) }), lie({ ...key, size: key.size + 1 }), good.slice(0, 20), '', '{"summary":2}\n'];
    for (const [i, text] of stale.entries()) {
      fs.writeFileSync(summaryFile(a.manifest), text);
      expect(readSummary(a.manifest, key.sha256, key.size)).toBeNull();
      const r = stageOver(a, `stale${i}`, second).r;
      expect(result(r)).toEqual(result(truth));
      // What it writes for the new manifest is what it counted, not the stale one.
      expect(fs.readFileSync(summaryFile(path.join(dir, `stale${i}.ndjson`)), 'utf8')).toBe(good);
    }
    // The same lie under the file's own key is taken (the key is what is checked): the pass is off by exactly it.
    fs.writeFileSync(summaryFile(a.manifest), lie(key).replace('"lines":5', `"lines":${JSON.parse(good).lines + 5}`).replace('"bytes":7', `"bytes":${JSON.parse(good).bytes + 7}`));
    const off = stageOver(a, 'off', second).r;
    expect({ entries: off.entries - 5, bytes: off.bytes - 7 }).toEqual({ entries: truth.entries, bytes: truth.bytes });
  });
});

describe('ManifestCursor.skipRun', () => {
  /** A sorted manifest of `count` usr/ files (and a few others around them), with an overlay naming every `every`-th path. */
  function manifestWithOverlay(count: number, every: number): { file: string; totals: { lines: number; bytes: number } } {
    const file = path.join(dir, 'm.ndjson');
    const w = new ManifestWriter(file, noFaults);
    const entries: ManifestEntry[] = [{ p: 'etc', t: 'd', m: 0o755, u: 0, g: 0 }, { p: 'etc/a', t: 'f', m: 0o644, u: 0, g: 0, s: 3, h: 'a'.repeat(64) }, { p: 'usr', t: 'd', m: 0o755, u: 0, g: 0 }];
    for (let i = 0; i < count; i++) entries.push({ p: `usr/f${String(i).padStart(6, '0')}`, t: 'f', m: 0o644, u: 0, g: 0, s: i * 7 + 1, h: 'b'.repeat(64) });
    entries.push({ p: 'var', t: 'd', m: 0o755, u: 0, g: 0 });
    for (const e of entries) w.write(e);
    w.close(false);
    const dirty = entries.filter((_, i) => i > 3 && i % every === 0).map((e) => e.p);
    const replaced = dirty.filter((_, i) => i % 2 === 0).map((p) => ({ p, t: 'f' as const, m: 0o600, u: 0, g: 0, s: 5, h: 'c'.repeat(64) }));
    fs.writeFileSync(overlayFile(file), formatOverlay(hashFile(file), dirty, [], replaced));
    return { file, totals: { lines: entries.length, bytes: entries.reduce((a, e) => a + (e.s ?? 0), 0) } };
  }

  /** A pass as snapshotManifest's drain makes it: runs under usr/ (skipped or counted), every other line read. */
  function pass(file: string, chunk: number, totals?: { lines: number; bytes: number }) {
    const c = new ManifestCursor(file, chunk, undefined, totals);
    const read: string[] = [];
    let lines = 0;
    let bytes = 0;
    for (let r = c.peekRaw(); r !== null; r = c.peekRaw()) {
      if (r.p.startsWith('usr/')) {
        if (totals !== undefined ? c.skipRun('usr', null) : (({ lines: l, bytes: b }) => ((lines += l), (bytes += b), l > 0))(c.passRun('usr', null))) continue;
      }
      const e = c.entryOf(c.nextRaw()!);
      read.push(e.p);
      lines += 1;
      bytes += e.t === 'f' ? (e.s ?? 0) : 0;
    }
    const rest = c.uncountedTotals();
    const file_ = c.fileTotals();
    c.close();
    return { read, lines: lines + (rest?.lines ?? 0), bytes: bytes + (rest?.bytes ?? 0), file: file_ };
  }

  for (const [count, every, chunk] of [
    [2000, 7, 512],
    [2000, 500, 1024],
    [3000, 3000, 4096],
    [500, 2, 300],
  ] as const) {
    it(`passes over exactly what passRun counts (${count} lines, an overlay point every ${every}, ${chunk}-byte buffer)`, () => {
      const m = manifestWithOverlay(count, every);
      const counting = pass(m.file, chunk);
      expect(counting.file).toEqual(m.totals);
      const skipping = pass(m.file, chunk, m.totals);
      expect(skipping).toEqual(counting);
    });
  }
});
