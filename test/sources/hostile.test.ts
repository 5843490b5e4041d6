import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { tarLayerSource } from '../../src/sources/tar-layer.js';
import { buildTree, hashTree, tempSysroot, type TempSysroot, type TreeSpec } from '../../src/testing/index.js';
import { hostileCases, resolvedInsideCases, writeHostileCorpus, type HostileCase } from '../../fixtures/make-hostile.mjs';
import { tarArchive } from '../../fixtures/tar-writer.mjs';

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
  it('covers every attack shape of ANCHORS.md "Hostile archives"', () => {
    const shapes = hostileCases({ canary: '/canary' }).map((k) => k.shape).join('\n');
    for (const s of ['../', 'directory, then symlink of the same name outside, then a file through it', 'backslash', 'case collision', 'Unicode normalisation collision', 'drive-relative', 'absolute hardlink target', '.. hardlink target', 'hardlink through a symlink', '10,000-deep path', 'gzip bomb', 'PAX path with NUL', 'negative base-256 size', 'device entry', 'FIFO entry', 'symlink whose target leaves the root, file written through it', 'base tree symlink etc -> /etc']) {
      expect(shapes).toContain(s);
    }
    // The repeated-roots shape is legitimate once resolved inside the root (see below).
    expect(resolvedInsideCases({ tag, canary: '/canary' }).map((k) => k.shape).join('\n')).toContain('repeated roots');
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
