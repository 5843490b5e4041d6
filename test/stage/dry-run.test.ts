import * as fs from 'node:fs';
import * as path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { hashTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { minisignKey, minisignSign } from '../trust/minisign-keys.js';
import { umociImage } from '../sources/oci-helpers.js';
import { hostPlatform } from '../../src/sources/oci/platform.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

const BASE = {
  'etc/os-release': 'ID=test\n',
  'etc/motd': 'hello\n',
  'etc/same.conf': 'same\n',
  'etc/old.conf': 'old\n',
  'srv/data/a': 'a\n',
  'srv/data/b': 'b\n',
  'srv/file': 'not a dir\n',
  'usr/bin/tool': 'tool\n',
};

function writeJson(s: TempSysroot, name: string, doc: unknown): string {
  const p = path.join(s.scratch, name);
  fs.writeFileSync(p, JSON.stringify(doc));
  return p;
}

/** The whole sysroot (every file, state included): a dry run must leave it byte for byte. */
const snapshot = (s: TempSysroot) => hashTree(s.dir);

describe('stage --dry-run', () => {
  it('prints what a stage would add, modify and remove, exactly what `diff` shows after the real stage; writes nothing', async () => {
    t = await tempSysroot({ tree: BASE });
    const spec = writeJson(t, 'u.json', {
      version: 1,
      files: [
        { path: '/etc/motd', contents: 'changed\n' },
        { path: '/etc/same.conf', contents: 'same\n' },
        { path: '/etc/new/app.conf', contents: 'new\n' },
      ],
      symlinks: [{ path: '/etc/link', target: 'motd' }],
      remove: ['/etc/old.conf', { path: '/srv/data', recursive: true }],
    });
    const before = snapshot(t);
    const dry = await cli(['stage', spec, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(dry.code, dry.err).toBe(0);
    expect(snapshot(t)).toBe(before);
    const plan = JSON.parse(dry.out);
    expect(plan.ok).toBe(true);
    expect(plan.issues).toEqual([]);

    const text = await cli(['stage', spec, '--dry-run', '--sysroot', t.dir]);
    expect(text.out).toContain('M etc/motd (content)');
    expect(text.out).toContain('A etc/new/app.conf');
    expect(text.out).toContain('D srv/data/a');
    expect(text.out).not.toContain('etc/same.conf');

    const staged = await t.sysroot.stage(spec);
    const real = (await t.sysroot.diff(t.sysroot.status().booted!, staged.id)).filter((c) => c.change !== 'modified' || c.what?.some((w) => w !== 'mtime'));
    const paths = (cs: { path: string; change: string }[]) => cs.map((c) => `${c.change} ${c.path}`);
    // directories whose mtime changed are the only difference a dry run does not predict
    expect(paths(plan.changes)).toEqual(paths(real.filter((c) => !(c.change === 'modified' && fs.statSync(path.join(staged.path, c.path)).isDirectory()))));
  });

  it('finds the conflicts a stage would hit and exits 3, recording nothing', async () => {
    t = await tempSysroot({ tree: BASE });
    const spec = writeJson(t, 'bad.json', {
      version: 1,
      files: [
        { path: '/etc/motd', contents: 'x\n', overwrite: false },
        { path: '/srv/file/below', contents: 'x\n' },
      ],
    });
    const before = snapshot(t);
    const r = await cli(['stage', spec, '--dry-run', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.out).toContain('APPLY_FAILED at etc/motd');
    expect(r.out).toContain('ENOTDIR');
    expect(r.out).toContain('would be rejected');
    expect(snapshot(t)).toBe(before);
    expect(t.sysroot.status().lastFailure).toBeNull();
    // and the real stage agrees
    expect((await cli(['stage', spec, '--sysroot', t.dir])).code).toBe(3);
  });

  it('rejects what the source itself rejects: a bad spec, a hostile layer, a missing signature', async () => {
    t = await tempSysroot({ tree: BASE });
    const bad = writeJson(t, 'schema.json', { version: 1, files: [{ path: '/etc/x', contents: 1 }], bogus: true });
    let r = await cli(['stage', bad, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.out).issues.length).toBeGreaterThan(0);

    const d = path.join(t.scratch, 'evil');
    fs.mkdirSync(d);
    fs.writeFileSync(path.join(d, 'x'), 'x');
    const tar = path.join(t.scratch, 'evil.tar');
    await execa('tar', ['-C', d, '-cf', tar, '-P', '--transform', 's,^,../../,', 'x']);
    r = await cli(['stage', tar, '--dry-run', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.out).toContain('PATH_ESCAPE');

    const k = await minisignKey(t.scratch, 'k');
    await t.sysroot.addTrustedKey(k.pub);
    const before = snapshot(t);
    const good = writeJson(t, 'good.json', { version: 1, files: [{ path: '/etc/a', contents: 'a\n' }] });
    r = await cli(['stage', good, '--dry-run', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.out).toContain('SIGNATURE_INVALID');
    await minisignSign(k.key, good);
    r = await cli(['stage', good, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(r.code, r.out).toBe(0);
    expect(JSON.parse(r.out).signature.keyId).toBe(k.id);
    expect(snapshot(t)).toBe(before);
  });

  it('an image: the whole-root change against the booted tree', async () => {
    // with the shared /var: the dry run lists the tree's changes as the real stage makes them
    t = await tempSysroot({ tree: BASE });
    const layout = path.join(t.scratch, 'img');
    await umociImage(t.scratch, layout, 'latest', [{ add: { 'etc/os-release': 'ID=test\n', 'etc/motd': 'image\n', 'opt/new': 'n\n' } }], { arch: hostPlatform().architecture });
    const r = await cli(['stage', layout, '--dry-run', '--json', '--sysroot', t.dir]);
    expect(r.code, r.out).toBe(0);
    const changes = JSON.parse(r.out).changes.map((c: { change: string; path: string }) => `${c.change} ${c.path}`);
    expect(changes).toContain('modified etc/motd');
    expect(changes).toContain('added opt/new');
    expect(changes).toContain('removed usr/bin/tool');
    expect(changes).not.toContain('modified etc/os-release');
    expect(changes.some((c: string) => c.endsWith('oci-layout') || c.includes('blobs'))).toBe(false);
    // the real stage changes the same paths (less directories whose attributes only the tree shows)
    const staged = await t.sysroot.stage(layout);
    const real = (await t.sysroot.diff(t.sysroot.status().booted!, staged.id))
      .filter((c) => !(c.change === 'modified' && fs.statSync(path.join(staged.path, c.path)).isDirectory()))
      .map((c) => `${c.change} ${c.path}`);
    expect(changes.filter((c: string) => !c.startsWith('modified') || !fs.statSync(path.join(staged.path, c.slice(9))).isDirectory())).toEqual(real);
  });
});
