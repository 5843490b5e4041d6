import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Sysroot } from '../../src/sysroot.js';
import type { StageProgress } from '../../src/stage/stage.js';
import { countingHook, hashTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';

/**
 * A stage of a source whose change set is applied over a copy of the base tree (an
 * Ignition config or an update spec read from a file: SourceInfo.overBase) starts that
 * copy before the plan (stage.ts, startEarlyBaseCopy), once the free-space preflight's
 * figure for the copy says there is room; buildTree takes it.
 */
let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const tree: Record<string, string> = { 'etc/os-release': 'ID=test\n', 'etc/conf/a': 'a\n' };
for (let i = 0; i < 50; i++) tree[`usr/share/doc/f${i}`] = `f${i}\n`;

function ignitionFile(dir: string, files: { path: string; contents: string }[]): string {
  const p = path.join(dir, 'update.ign');
  const doc = { ignition: { version: '3.4.0' }, storage: { files: files.map((f) => ({ path: f.path, overwrite: true, mode: 0o644, contents: { source: `data:,${encodeURIComponent(f.contents)}` } })) } };
  fs.writeFileSync(p, JSON.stringify(doc));
  return p;
}

describe('the early copy of the whole base tree', () => {
  it('is made before the plan and taken: the tree is there, usr/ linked, when the copy step starts; the result is the update over the base', async () => {
    t = await tempSysroot({ tree });
    const ign = ignitionFile(t.scratch, [
      { path: '/usr/share/doc/f3', contents: 'three\n' },
      { path: '/etc/motd', contents: 'hello\n' },
    ]);
    const booted = t.sysroot.treePath('0001');
    const before = hashTree(booted);
    const seen: string[] = [];
    const copyEvents: StageProgress[] = [];
    const r = await t.sysroot.stage(ign, {
      onProgress: (p) => {
        if (p.phase === 'copy' && p.done > 0) copyEvents.push({ ...p });
        if (p.phase !== 'copy' || p.done !== 0) return;
        const f = path.join(t!.dir, 'work', '0002', 'tree', 'usr/share/doc/f7');
        seen.push(fs.existsSync(f) && fs.statSync(f).ino === fs.statSync(path.join(booted, 'usr/share/doc/f7')).ino ? 'linked' : 'not yet');
      },
    });
    // Copied before the copy step was entered (the step then only takes it): reported once, whole.
    expect(seen).toEqual(['linked']);
    expect(copyEvents).toHaveLength(1);
    expect(copyEvents[0]!.done).toBe(copyEvents[0]!.total);
    expect(fs.readFileSync(path.join(r.path, 'usr/share/doc/f3'), 'utf8')).toBe('three\n');
    expect(fs.readFileSync(path.join(r.path, 'etc/motd'), 'utf8')).toBe('hello\n');
    // The file the update replaced is a new inode; the booted tree is untouched.
    expect(fs.statSync(path.join(r.path, 'usr/share/doc/f3')).ino).not.toBe(fs.statSync(path.join(booted, 'usr/share/doc/f3')).ino);
    expect(fs.statSync(path.join(r.path, 'usr/share/doc/f9')).ino).toBe(fs.statSync(path.join(booted, 'usr/share/doc/f9')).ino);
    expect(hashTree(booted)).toBe(before);
    expect(r.delta.sort()).toEqual(['etc/motd', 'usr/share/doc/f3']);
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
  });

  it('is not started without room for it: NO_SPACE from the preflight, and nothing was written into work/', async () => {
    t = await tempSysroot({ tree });
    const ign = ignitionFile(t.scratch, [{ path: '/etc/motd', contents: 'hello\n' }]);
    const hook = countingHook();
    const s = await Sysroot.open(t.dir, { faults: hook });
    const err = await s.stage(ign, { builtins: { freeSpace: { reserveBytes: 2 ** 50 } } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'NO_SPACE' });
    const work = path.join(t.dir, 'work');
    // No write below work/ at all (the copy's mkdir, links and copies would be counted here).
    expect(hook.ops.filter((o) => o.includes(`${work}/`))).toEqual([]);
    expect(fs.readdirSync(work)).toEqual([]);
    expect(s.status().lastFailure).toMatchObject({ code: 'NO_SPACE', phase: 'validate' });
  });

  it('a plan that fails after the copy started leaves nothing in work/, the booted tree untouched, the failure recorded', async () => {
    t = await tempSysroot({ tree });
    const bad = path.join(t.scratch, 'bad.ign');
    // Valid JSON, an Ignition config refused when it is planned (a data URL with a stray "%").
    fs.writeFileSync(bad, JSON.stringify({ ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/x', contents: { source: 'data:,%zz' } }] } }));
    const booted = t.sysroot.treePath('0001');
    const before = hashTree(booted);
    // With a fault hook the copy runs whole before the plan: it was made, then removed.
    const hook = countingHook();
    const s = await Sysroot.open(t.dir, { faults: hook });
    const err = await s.stage(bad).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'SOURCE_CORRUPT' });
    expect(hook.ops.filter((o) => o.startsWith('link ') && o.includes(path.join(t!.dir, 'work', '0002', 'tree')))).toHaveLength(50);
    expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
    expect(hashTree(booted)).toBe(before);
    expect(s.status().lastFailure).toMatchObject({ step: 'plan' });
    expect(s.status().staged).toBeNull();
  });

  it('an in-memory config is planned first and copied in the copy step, as before', async () => {
    t = await tempSysroot({ tree });
    const seen: string[] = [];
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello' }] }, {
      onProgress: (p) => {
        if (p.phase !== 'copy' || p.done !== 0) return;
        seen.push(fs.existsSync(path.join(t!.dir, 'work', '0002', 'tree', 'usr/share/doc/f7')) ? 'linked' : 'not yet');
      },
    });
    expect(seen).toEqual(['not yet']);
  });
});
