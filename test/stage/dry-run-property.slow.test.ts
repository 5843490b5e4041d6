import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StagedrootError } from '../../src/errors.js';
import { exitCodeFor } from '../../src/exit-codes.js';
import { hostPlatform } from '../../src/sources/oci/platform.js';
import { tarLayerSource } from '../../src/sources/tar/layer-source.js';
import { directorySource } from '../../src/sources/directory.js';
import type { Source } from '../../src/sources/source.js';
import { buildTree, hashTree, tempSysroot, type TempSysroot, type TreeSpec } from '../../src/testing/index.js';
import { HOSTILE_BASE_TREE, writeHostileCorpus as writeHostileIgnition } from '../../fixtures/ignition/hostile-cases.js';
import { ACCEPTED_CASES } from '../../fixtures/ignition/accepted-cases.js';
import { resolvedInsideCases, writeHostileCorpus as writeHostileLayers } from '../../fixtures/make-hostile.mjs';
import { tarArchive } from '../../fixtures/tar-writer.mjs';
import { BASE_TREE as IGNITION_BASE } from '../sources/ignition/ignition-helpers.js';
import { umociImage } from '../sources/oci/oci-helpers.js';

/**
 * The dry run and the stage are one planner: for every source in fixtures/ (update specs,
 * the Ignition configs, the hostile layers, and layers, directories and images built
 * here) the dry run's verdict is the stage's exit code, its issue the stage's error, its
 * warnings the stage's, its delta the stage's `delta`, its changes what `diff` lists
 * after the real stage (in a temp-dir sysroot), and it writes nothing.
 */
interface Case {
  name: string;
  base: TreeSpec;
  /** A fresh source each call (a dry run and a stage each read it once). */
  source: () => Source | string;
}

const DEMO_BASE: TreeSpec = {
  'etc/os-release': 'ID=demo\n',
  'etc/app/app.conf': 'listen = 80\n',
  'home/core/test': 'a regular file where the update wants a directory\n',
  'usr/bin/tool': '#!/bin/sh\n',
};
const LAYER_BASE: TreeSpec = {
  'etc/hostname': 'base\n',
  'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n',
  'etc/app/a.conf': 'a\n',
  'etc/app/b.conf': 'b\n',
  'usr/bin/tool': '#!/bin/sh\necho tool\n',
  'usr/lib/data/x': 'x\n',
  'srv/file': 'a file\n',
};
const CHECKS = ['verdict', 'issue', 'warnings', 'delta', 'diff', 'writes nothing'] as const;

let scratch: string;
const cases: Case[] = [];

beforeAll(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-dry-property-'));
  const fixtures = path.resolve(__dirname, '../../fixtures');

  for (const f of fs.readdirSync(path.join(fixtures, 'demo')).sort()) {
    cases.push({ name: `spec demo/${f}`, base: DEMO_BASE, source: () => path.join(fixtures, 'demo', f) });
  }

  const ign = writeHostileIgnition(path.join(scratch, 'hostile-ignition'));
  for (const c of ign.cases) cases.push({ name: `ignition hostile/${c.name}`, base: HOSTILE_BASE_TREE, source: () => path.join(scratch, 'hostile-ignition', `${c.name}.ign`) });
  for (const c of ACCEPTED_CASES) {
    const file = path.join(scratch, `accepted-${c.name}.ign`);
    fs.writeFileSync(file, JSON.stringify(c.doc));
    cases.push({ name: `ignition accepted/${c.name}`, base: c.tree ?? IGNITION_BASE, source: () => file });
  }

  for (const f of fs.readdirSync(path.join(fixtures, 'machine-config')).filter((n) => n.endsWith('.json')).sort()) {
    cases.push({ name: `machine-config ${f}`, base: IGNITION_BASE, source: () => path.join(fixtures, 'machine-config', f) });
  }

  const canary = buildTree(path.join(scratch, 'canary'), { secret: 'canary\n' });
  for (const k of await writeHostileLayers(path.join(scratch, 'hostile-layers'), { canary })) {
    cases.push({ name: `layer hostile/${k.name}`, base: k.base ?? LAYER_BASE, source: () => (k.limits ? tarLayerSource(k.file, { limits: k.limits }) : k.file) });
  }
  for (const k of resolvedInsideCases({ tag: 'dry', canary })) {
    const file = path.join(scratch, `inside-${k.name}.tar`);
    fs.writeFileSync(file, tarArchive(k.entries, { end: k.end !== false }));
    cases.push({ name: `layer inside/${k.name}`, base: k.base ?? LAYER_BASE, source: () => file });
  }
  const layers: [string, object[]][] = [
    ['whiteouts and an opaque directory', [{ name: 'etc/.wh.hostname', body: '' }, { name: 'etc/app/.wh..wh..opq', body: '' }, { name: 'etc/app/c.conf', body: 'c\n' }, { name: 'usr/lib/.wh.data', body: '' }]],
    ['a directory over a file, a file over a directory', [{ name: 'srv/file/', type: 'dir' }, { name: 'srv/file/inner', body: 'i\n' }, { name: 'etc/app', body: 'now a file\n' }]],
    ['modes, links and a hard link', [{ name: 'usr/bin/tool', body: '#!/bin/sh\necho new\n', mode: 0o700 }, { name: 'usr/bin/alias', type: 'symlink', linkname: 'tool' }, { name: 'usr/bin/hard', type: 'hardlink', linkname: 'usr/bin/tool' }]],
  ];
  for (const [name, entries] of layers) {
    const file = path.join(scratch, `${name.replace(/\W+/g, '-')}.tar`);
    fs.writeFileSync(file, tarArchive(entries));
    cases.push({ name: `layer ${name}`, base: LAYER_BASE, source: () => file });
    cases.push({ name: `layer --replace ${name}`, base: LAYER_BASE, source: () => tarLayerSource(file, { replace: true }) });
  }

  const dir = buildTree(path.join(scratch, 'dir-source'), { 'etc/hostname': 'dir\n', 'etc/app/a.conf': 'a\n', 'etc/new.conf': 'new\n', 'usr/bin/tool': { content: '#!/bin/sh\n', mode: 0o755 }, 'opt/link': { symlink: '../etc/new.conf' } });
  cases.push({ name: 'directory over the booted tree', base: LAYER_BASE, source: () => directorySource(dir) });
  cases.push({ name: 'directory --replace', base: LAYER_BASE, source: () => directorySource(dir, { replace: true }) });

  const image = path.join(scratch, 'image');
  await umociImage(scratch, image, 'latest', [{ add: { 'etc/hostname': 'image\n', 'etc/app/a.conf': 'a\n', 'opt/new': 'n\n' } }, { whiteout: '/etc/app/a.conf' }, { add: { 'etc/app/d.conf': 'd\n' }, at: '/', opaque: false }], { arch: hostPlatform().architecture });
  cases.push({ name: 'OCI image (umoci, with a whiteout)', base: LAYER_BASE, source: () => image });
}, 120_000);

afterAll(() => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

const lines = (cs: readonly { path: string; change: string; what?: string[] }[]) => cs.map((c) => `${c.change} ${c.path}${c.what ? ` (${c.what.join(',')})` : ''}`);
const issue = (i: { code: string; path?: string; message: string }) => `${i.code} at ${i.path ?? ''}: ${i.message}`;

describe('stage --dry-run is the stage, less the writes (property over every fixture source)', () => {
  const sysroots = new Map<TreeSpec, TempSysroot>();
  afterAll(() => {
    for (const t of sysroots.values()) t.cleanup();
  });

  it('holds for every source: verdict, issue, warnings, delta, diff, nothing written', { timeout: 900_000 }, async () => {
    const failures: string[] = [];
    let accepted = 0;
    for (const c of cases) {
      let t = sysroots.get(c.base);
      if (t === undefined) {
        t = await tempSysroot({ tree: c.base });
        sysroots.set(c.base, t);
      }
      const before = hashTree(t.dir);
      const dry = await t.sysroot.dryRun(c.source());
      if (hashTree(t.dir) !== before) failures.push(`${c.name}: writes nothing: the dry run changed the sysroot`);
      const err = await t.sysroot.stage(c.source()).then((r) => r, (e: unknown) => e as Error);
      const staged = err instanceof Error ? null : err;
      const code = staged === null ? exitCodeFor(err) : 0;
      const want = (check: string, ok: boolean, detail: string) => void (ok || failures.push(`${c.name}: ${check}: ${detail}`));
      want('verdict', (dry.ok ? 0 : 3) === code, `dry run ${dry.ok ? 'ok' : 'rejected'}, stage exit ${code}${staged === null ? ` (${(err as Error).message})` : ''}`);
      if (staged === null) {
        const e = err as StagedrootError;
        // the stage's error: its listed issues, or itself when it lists none
        const listed = e.issues.filter((i) => i.severity === 'error');
        const stageIssues = (listed.length > 0 ? listed : [{ code: e.code, path: e.path ?? '', message: e.message }]).map(issue);
        want('issue', JSON.stringify(dry.issues.map(issue)) === JSON.stringify(stageIssues), `${dry.issues.map(issue).join(' | ')} vs ${stageIssues.join(' | ')}`);
        continue;
      }
      accepted += 1;
      want('warnings', JSON.stringify(dry.warnings.map(issue)) === JSON.stringify(staged.warnings.map(issue)), `${dry.warnings.map(issue).join(' | ')} vs ${staged.warnings.map(issue).join(' | ')}`);
      want('delta', JSON.stringify(dry.delta) === JSON.stringify(staged.delta), `${dry.delta.join(' ')} vs ${staged.delta.join(' ')}`);
      const diff = await t.sysroot.diff(t.sysroot.status().booted!, staged.id);
      want('diff', JSON.stringify(lines(dry.changes)) === JSON.stringify(lines(diff)), `${lines(dry.changes).join(' ')} vs ${lines(diff).join(' ')}`);
    }
    console.info(`dry-run property: ${cases.length} sources × ${CHECKS.length} checks (${accepted} staged, ${cases.length - accepted} rejected; the accepted ones checked for warnings, delta and diff, the rejected ones for their issue)`);
    expect(failures).toEqual([]);
    expect(cases.length).toBeGreaterThan(100);
    expect(accepted).toBeGreaterThan(15);
  });
});
