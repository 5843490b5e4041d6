/**
 * An update's removals win at finalize, for whole-tree sources too (`--replace`, an OS
 * image): the delta records every path of the booted tree the update removed, and the
 * merge tells a local addition (not in the booted manifest: carried) from a file the
 * update removed (in it: stays removed when unchanged locally; a local edit of it is
 * kept aside and reported, as on any path the update decides).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostPlatform } from '../../src/sources/oci/platform.js';
import { buildTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { umociImage } from '../sources/oci/oci-helpers.js';

const BASE = {
  'etc/os-release': 'ID=test\n',
  'etc/a.conf': 'a=1\n',
  'etc/b.conf': 'b=1\n',
  'etc/old.d/x.conf': 'x=1\n',
  'usr/bin/tool': '#!/bin/sh\n',
  'usr/lib/dropped/lib.so': 'lib\n',
};
/** The next OS version: it drops etc/b.conf, etc/old.d and usr/lib, changes a.conf. */
const NEXT = { 'etc/os-release': 'ID=test\n', 'etc/a.conf': 'a=2\n', 'usr/bin/tool': '#!/bin/sh\n' };

const read = (p: string): string => fs.readFileSync(p, 'utf8');
const stageOut = async (t: TempSysroot, ...args: string[]): Promise<void> => {
  const r = await cli(['stage', ...args, '--sysroot', t.dir]);
  expect(r.code, r.err).toBe(0);
};
const finalizeOut = async (t: TempSysroot): Promise<string> => {
  const r = await cli(['finalize', '--sysroot', t.dir]);
  expect(r.code, r.err).toBe(0);
  return r.out;
};
const etcOf = (t: TempSysroot, id: string): string[] => {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const n of fs.readdirSync(path.join(t.sysroot.treePath(id), rel)).sort()) {
      out.push(`${rel}/${n}`);
      if (fs.lstatSync(path.join(t.sysroot.treePath(id), rel, n)).isDirectory()) walk(`${rel}/${n}`);
    }
  };
  walk('etc');
  return out;
};

describe("an update's removals at finalize", () => {
  let t: TempSysroot | undefined;
  afterEach(() => t?.cleanup());

  it('stage --replace of a tree without etc/b.conf: b.conf stays removed, nothing carried; the delta names what the update removed', async () => {
    t = await tempSysroot({ tree: BASE });
    const next = buildTree(path.join(t.scratch, 'next'), NEXT);
    await stageOut(t, next, '--replace');
    const staged = t.sysroot.status().staged!;
    const delta = JSON.parse(read(path.join(t.dir, 'deploy', staged, 'delta.json'))) as { removed: string[] };
    expect(delta.removed).toEqual(['etc/b.conf', 'etc/old.d', 'usr/lib']); // NEXT has no usr/lib at all
    expect(delta.removed).not.toContain('etc/old.d/x.conf'); // below a removed path: removed with it
    const out = await finalizeOut(t);
    expect(out).toMatch(/0 local changes carried/);
    expect(etcOf(t, staged)).toEqual(['etc/a.conf', 'etc/os-release']);
    expect(read(path.join(t.sysroot.treePath(staged), 'etc/a.conf'))).toBe('a=2\n');
    expect(t.sysroot.status().lastMerge).toMatchObject({ carried: 0, conflicts: [] });
    expect((await t.sysroot.verify(staged)).drift).toEqual([]);
  });

  it('stage --replace: a local addition is carried; a local edit of a file the update removed is kept aside and reported', async () => {
    t = await tempSysroot({ tree: BASE });
    const live = t.sysroot.treePath('0001');
    fs.writeFileSync(path.join(live, 'etc/local.conf'), 'mine\n'); // before the stage
    await stageOut(t, buildTree(path.join(t.scratch, 'next'), NEXT), '--replace');
    const staged = t.sysroot.status().staged!;
    fs.writeFileSync(path.join(live, 'etc/b.conf'), 'b=edited\n'); // after it
    fs.writeFileSync(path.join(live, 'etc/later.conf'), 'later\n');
    const out = await finalizeOut(t);
    expect(out).toMatch(/2 local changes carried/);
    expect(etcOf(t, staged)).toEqual(['etc/a.conf', 'etc/later.conf', 'etc/local.conf', 'etc/os-release']);
    const merge = t.sysroot.status().lastMerge!;
    expect(merge).toMatchObject({ carried: 2, conflicts: [{ path: 'etc/b.conf' }] });
    expect(read(merge.conflicts[0]!.kept!)).toBe('b=edited\n');
  });

  it('an OS image built by umoci: after finalize etc/ holds what the image has, not the previous deployment files', async () => {
    t = await tempSysroot({ tree: BASE });
    const layout = path.join(t.scratch, 'image');
    await umociImage(t.scratch, layout, 'latest', [{ add: NEXT }], { arch: hostPlatform().architecture });
    await stageOut(t, layout);
    const staged = t.sysroot.status().staged!;
    const out = await finalizeOut(t);
    expect(out).toMatch(/0 local changes carried/);
    expect(etcOf(t, staged)).toEqual(['etc/a.conf', 'etc/os-release']);
    expect(fs.existsSync(path.join(t.sysroot.treePath(staged), 'usr/lib'))).toBe(false);
  });
});
