import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../../src/errors.js';
import { exitCodeFor } from '../../../src/exit-codes.js';
import { tarLayerSource } from '../../../src/sources/tar/layer-source.js';
import { buildTree, hashTree, tempSysroot, type TempSysroot, type TreeSpec } from '../../../src/testing/index.js';
import { hostileCases, resolvedInsideCases, writeHostileCorpus, type HostileCase } from '../../../fixtures/make-hostile.mjs';
import { tarArchive } from '../../../fixtures/tar-writer.mjs';

/**
 * The hostile corpus (fixtures/make-hostile.mjs), generated into a temp dir with a
 * canary directory beside the sysroot. Every case must be rejected (exit 3) with an
 * error naming the entry, and leave the booted tree, the canary and the sysroot's
 * pointers exactly as they were.
 */
const BASE: TreeSpec = {
  'etc/hostname': 'base\n',
  'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n',
  'usr/bin/tool': '#!/bin/sh\necho tool\n',
  'var/lib/data': 'data',
};

let root: string;
let canary: string;
let corpus: HostileCase[];
const tag = randomBytes(4).toString('hex');

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-hostile-'));
  canary = path.join(root, 'canary');
  buildTree(canary, { secret: 'canary secret\n', 'sub/file': 'untouched\n' });
  corpus = await writeHostileCorpus(path.join(root, 'corpus'), { canary });
});

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

/** Everything a rejected stage must leave alone. */
function snapshot(t: TempSysroot): Record<string, unknown> {
  const s = t.sysroot.status();
  const booted = s.booted!;
  return {
    bootedTree: hashTree(t.sysroot.treePath(booted)),
    bootedManifest: fs.readFileSync(path.join(t.dir, 'deploy', booted, 'manifest.ndjson'), 'utf8'),
    canary: hashTree(canary),
    around: fs.readdirSync(path.dirname(t.dir)).sort(),
    pointers: { booted: s.booted, current: s.current, staged: s.staged, rollback: s.rollback },
    currentLink: fs.readlinkSync(path.join(t.dir, 'current')),
  };
}

// The names are known at collection time; the archives (which embed the canary path) in beforeAll.
const names = hostileCases({ canary: '/canary' }).map((k) => k.name);

describe('hostile archives are rejected before anything outside the staging area changes', () => {
  it('covers every attack shape of ANCHORS.md "Hostile archives": each archive really holds its shape', () => {
    // Not the fixture's labels: the bytes of each archive are read back and must show the attack.
    const byShape = (shape: string) => corpus.filter((k) => k.shape.includes(shape));
    for (const [shape, holds] of Object.entries(SHAPE_CHECKS)) {
      const cases = byShape(shape);
      expect(cases.length, `no case for the shape "${shape}"`).toBeGreaterThan(0);
      for (const k of cases) expect(holds(readArchive(k.file), k), `${k.name} does not hold "${shape}"`).toBe(true);
    }
    // The checks can fail: a harmless archive holds none of the shapes.
    const harmless = readArchive(writeTemp('harmless.tar', tarArchive([{ name: 'etc/a', body: 'x' }, { name: 'etc/l', type: 'symlink', linkname: 'a' }])));
    for (const [shape, holds] of Object.entries(SHAPE_CHECKS)) expect(holds(harmless, { base: undefined }), shape).toBe(false);
    // The repeated-roots shape is legitimate once resolved inside the root (see below).
    const inside = resolvedInsideCases({ tag, canary: '/canary' }).find((k) => k.shape.includes('repeated roots'))!;
    expect(inside.entries.some((e) => e.name?.startsWith('////'))).toBe(true);
    console.log(`hostile corpus: ${names.length} rejected cases, ${resolvedInsideCases({ tag, canary: '/canary' }).length} resolved-inside cases`);
  });

  it.each(names)('%s', async (name) => {
    const k = corpus.find((c) => c.name === name)!;
    const t = await tempSysroot({ tree: k.base ?? BASE });
    try {
      const before = snapshot(t);
      // Cases with lowered limits need the source built with them; the others go through detection.
      const source = k.limits ? tarLayerSource(k.file, { limits: k.limits }) : k.file;
      const err = await t.sysroot.stage(source).then(() => null, (e: unknown) => e);
      expect(err, 'the stage must fail').toBeInstanceOf(StagedrootError);
      const e = err as StagedrootError;
      expect(k.codes, e.message).toContain(e.code);
      expect(e.isRejection).toBe(true);
      expect(exitCodeFor(e)).toBe(3);
      expect(e.message).toContain(k.names);
      if (process.env.SHOW_MESSAGES) console.log(`${name}: [${e.code}] ${e.message.slice(0, 300)}`);
      expect(snapshot(t)).toEqual(before);
      expect(t.sysroot.status().lastFailure?.code).toBe(e.code);
      expect((await t.sysroot.verify()).drift).toEqual([]);
      for (const h of k.host ?? []) expect(fs.existsSync(h), h).toBe(false);
    } finally {
      t.cleanup();
    }
  });
});

describe('archives that are legitimate once resolved inside the root', () => {
  it.each(resolvedInsideCases({ tag, canary: '/canary' }).map((k) => k.name))('%s lands inside the staged tree', async (name) => {
    const k = resolvedInsideCases({ tag, canary }).find((c) => c.name === name)!;
    const t = await tempSysroot({ tree: k.base ?? BASE });
    try {
      const before = snapshot(t);
      const file = path.join(t.scratch, `${k.name}.tar`);
      fs.writeFileSync(file, tarArchive(k.entries, { end: k.end !== false }));
      const r = await t.sysroot.stage(file);
      const landed = path.join(r.path, k.lands);
      expect(fs.lstatSync(landed).isFile()).toBe(true);
      expect(fs.readFileSync(landed, 'utf8')).toMatch(/inside|\[Unit\]/);
      // Only the staged deployment is new: booted tree, canary and host are as they were.
      const after = snapshot(t);
      expect({ ...after, pointers: { ...(after.pointers as object), staged: null } }).toEqual(before);
      if (k.host !== undefined && k.host.startsWith(canary)) expect(hashTree(canary)).toBe(before.canary);
      else if (k.host !== undefined) expect(fs.existsSync(k.host), k.host).toBe(false);
      expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    } finally {
      t.cleanup();
    }
  });
});

/** One tar header as an extractor sees it: PAX and GNU long names applied. */
interface RawEntry {
  name: string;
  type: string;
  linkname: string;
  /** The raw 12-byte size field (base-256 when its first byte has the high bit). */
  sizeField: Buffer;
  pax: Record<string, string>;
}

interface Archive {
  gzip: boolean;
  /** Bytes of the file as stored, and of the tar inside it (gunzipped, capped). */
  fileBytes: number;
  tarBytes: number;
  entries: RawEntry[];
}

const cstr = (b: Buffer): string => {
  const nul = b.indexOf(0);
  return (nul < 0 ? b : b.subarray(0, nul)).toString('utf8');
};

/** Reads an archive's headers byte by byte, the way the hostile shapes are written (no library that would normalise them). */
function readArchive(file: string): Archive {
  const stored = fs.readFileSync(file);
  const gz = stored[0] === 0x1f && stored[1] === 0x8b;
  let tar: Buffer;
  try {
    tar = gz ? gunzipSync(stored, { maxOutputLength: 128 * 1024 * 1024 }) : stored;
  } catch {
    tar = Buffer.alloc(0); // corrupt compressed stream: no headers to read
  }
  const entries: RawEntry[] = [];
  let pending: Record<string, string> = {};
  let longName: string | undefined;
  for (let off = 0; off + 512 <= tar.length; ) {
    const h = tar.subarray(off, off + 512);
    if (h.every((x) => x === 0)) break;
    const sizeField = Buffer.from(h.subarray(124, 136));
    const size = sizeField[0]! & 0x80 ? 0 : parseInt(cstr(sizeField).trim() || '0', 8) || 0;
    const body = tar.subarray(off + 512, off + 512 + size);
    const type = String.fromCharCode(h[156]!);
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x') {
      for (const m of body.toString('utf8').matchAll(/(\d+) ([^=]+)=([\s\S]*?)\n(?=\d+ |$)/g)) pending[m[2]!] = m[3]!;
      continue;
    }
    if (type === 'L') {
      longName = body.toString('utf8').replace(/\0$/, '');
      continue;
    }
    const prefix = cstr(h.subarray(345, 500));
    const plain = (prefix ? prefix + '/' : '') + cstr(h.subarray(0, 100));
    entries.push({ name: pending.path ?? longName ?? plain, type, linkname: pending.linkpath ?? cstr(h.subarray(157, 257)), sizeField, pax: pending });
    pending = {};
    longName = undefined;
  }
  return { gzip: gz, fileBytes: stored.length, tarBytes: tar.length, entries };
}

const parts = (p: string): string[] => p.split('/').filter((c) => c !== '' && c !== '.');
/** A link target that leaves the root from the link's directory: absolute, or more ".." than the link is deep. */
const leavesRoot = (link: string, target: string): boolean => {
  if (target.startsWith('/')) return true;
  let depth = parts(link).length - 1;
  for (const c of parts(target)) {
    depth += c === '..' ? -1 : 1;
    if (depth < 0) return true;
  }
  return false;
};
const isSymlink = (e: RawEntry) => e.type === '2';
const isHardlink = (e: RawEntry) => e.type === '1';
const written = (a: Archive, under: string, after: number) => a.entries.slice(after + 1).some((e) => e.name.startsWith(under + '/'));

/** For each attack shape of ANCHORS.md: does an archive (with its base tree) really hold it? */
const SHAPE_CHECKS: Record<string, (a: Archive, k: { base?: unknown }) => boolean> = {
  '../': (a) => a.entries.some((e) => parts(e.name).includes('..')),
  'directory, then symlink of the same name outside, then a file through it': (a) =>
    a.entries.some((d, i) => d.type === '5' && a.entries.some((l, j) => j > i && isSymlink(l) && l.name === d.name && leavesRoot(l.name, l.linkname) && written(a, l.name, j))),
  backslash: (a) => a.entries.some((e) => e.name.includes('\\') || (isSymlink(e) && e.linkname.includes('\\'))),
  'case collision': (a) => a.entries.some((x, i) => a.entries.some((y, j) => j !== i && x.name !== y.name && x.name.toLowerCase() === y.name.toLowerCase() && (isSymlink(x) || isSymlink(y)))),
  'Unicode normalisation collision': (a) =>
    a.entries.some((x, i) => a.entries.some((y, j) => j !== i && parts(x.name)[0] !== parts(y.name)[0] && parts(x.name)[0]!.normalize('NFC') === parts(y.name)[0]!.normalize('NFC'))),
  'drive-relative': (a) => a.entries.some((e) => /^[A-Za-z]:[^/\\]/.test(e.name)),
  'absolute hardlink target': (a) => a.entries.some((e) => isHardlink(e) && e.linkname.startsWith('/')),
  '.. hardlink target': (a) => a.entries.some((e) => isHardlink(e) && parts(e.linkname).includes('..')),
  'hardlink through a symlink': (a) => a.entries.some((l, i) => isSymlink(l) && a.entries.some((h, j) => j > i && isHardlink(h) && h.linkname.startsWith(l.name + '/'))),
  '10,000-deep path': (a) => a.entries.some((e) => parts(e.name).length >= 10_000),
  // Stored small, huge inside: an inflated tar 50 times the file, a declared size 1000 times it, or thousands of entries.
  'gzip bomb': (a) =>
    a.gzip && (a.tarBytes >= 50 * a.fileBytes || a.entries.length >= 5000 || a.entries.some((e) => e.sizeField[0] === 0x80 && e.sizeField.readBigUInt64BE(4) >= BigInt(1000 * a.fileBytes))),
  'PAX path with NUL': (a) => a.entries.some((e) => e.pax.path?.includes('\0') === true),
  'negative base-256 size': (a) => a.entries.some((e) => e.sizeField[0] === 0xff),
  'device entry': (a) => a.entries.some((e) => e.type === '3' || e.type === '4'),
  'FIFO entry': (a) => a.entries.some((e) => e.type === '6'),
  'symlink whose target leaves the root, file written through it': (a) => a.entries.some((l, i) => isSymlink(l) && leavesRoot(l.name, l.linkname) && written(a, l.name, i)),
  'base tree symlink etc -> /etc': (a, k) => {
    const etc = (k.base as Record<string, { symlink?: string }> | undefined)?.etc;
    return etc?.symlink === '/etc' && a.entries.some((e) => e.name.startsWith('etc/'));
  },
};

function writeTemp(name: string, data: Buffer): string {
  const p = path.join(root, name);
  fs.writeFileSync(p, data);
  return p;
}
