/** The CLI over shared directories and the /etc merge: init --shared, status (text and JSON), exit codes of conflicts. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildTree } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

let base: string;
let sysroot: string;
const S = (): string[] => ['--sysroot', sysroot];
const write = (name: string, doc: unknown): string => {
  const p = path.join(base, name);
  fs.writeFileSync(p, JSON.stringify(doc));
  return p;
};
const statusJson = async (): Promise<Record<string, unknown> & { shared: Record<string, string>; lastMerge: { id: string; carried: number; conflicts: { path: string; kept: string | null }[] } | null }> => JSON.parse((await cli(['status', '--json', ...S()])).out);

describe('CLI: shared directories and the merge', () => {
  beforeEach(async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-cli-shared-'));
    sysroot = path.join(base, 'sysroot');
    const tree = buildTree(path.join(base, 'tree'), { 'etc/app.conf': 'listen = 80\n', 'etc/motd': 'hi\n', 'var/lib/db/data': 'row1\n', 'srv/data/x': 'x\n', 'usr/bin/app': 'app\n' });
    const r = await cli(['init', '--from', tree, '--shared', 'var', '--shared', '/srv/data', ...S()]);
    expect(r, r.err).toMatchObject({ code: 0 });
    expect(r.out).toContain(`shared /var: ${path.join(sysroot, 'shared', 'var')}`);
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  it('init --shared is repeatable and stored; a bad one is a usage error (exit 2)', async () => {
    const st = await statusJson();
    expect(st.shared).toEqual({ var: path.join(sysroot, 'shared', 'var'), 'srv/data': path.join(sysroot, 'shared', 'srv/data') });
    expect(fs.readFileSync(path.join(sysroot, 'shared.list'), 'utf8')).toBe('var\nsrv/data\n');
    expect(fs.readFileSync(path.join(st.shared['srv/data']!, 'x'), 'utf8')).toBe('x\n');
    expect(st.lastMerge).toBeNull();
    const bad = await cli(['init', '--shared', '../escape', '--sysroot', path.join(base, 'other')]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--shared/);
    const text = (await cli(['status', ...S()])).out;
    expect(text).toContain(`shared: /var at ${path.join(sysroot, 'shared', 'var')}, /srv/data at ${path.join(sysroot, 'shared', 'srv/data')}`);
  });

  it('finalize prints the merge; status --json and status show lastMerge with the kept paths', async () => {
    const spec = write('u.json', { files: [{ path: '/etc/motd', contents: 'managed\n' }] });
    expect((await cli(['stage', spec, ...S()])).code).toBe(0);
    const live = path.join(sysroot, 'deploy/0001/tree/etc');
    fs.writeFileSync(path.join(live, 'motd'), 'local\n');
    fs.writeFileSync(path.join(live, 'app.conf'), 'listen = 8080\n');
    fs.appendFileSync(path.join(sysroot, 'shared/var/lib/db/data'), 'row2\n');
    const fin = await cli(['finalize', ...S()]);
    expect(fin, fin.err).toMatchObject({ code: 0 });
    const kept = path.join(sysroot, 'kept', '0002', 'etc/motd');
    expect(fin.out).toContain('1 local change carried, 1 conflict where the update won');
    expect(fin.out).toContain(`etc/motd: local version kept at ${kept}`);
    expect((await cli(['boot', ...S()])).code).toBe(0);
    const st = await statusJson();
    expect(st.lastMerge).toEqual({ id: '0002', at: expect.any(String), carried: 1, conflicts: [{ path: 'etc/motd', kept }] });
    expect(fs.readFileSync(kept, 'utf8')).toBe('local\n');
    expect(fs.readFileSync(path.join(sysroot, 'current/etc/app.conf'), 'utf8')).toBe('listen = 8080\n');
    expect(fs.readFileSync(path.join(sysroot, 'shared/var/lib/db/data'), 'utf8')).toBe('row1\nrow2\n');
    expect((await cli(['status', ...S()])).out).toContain('last merge into 0002');
  });

  it('a type conflict: stage exits 3 naming the path; one that appears after stage makes finalize exit 1, the next boot report it', async () => {
    const live = path.join(sysroot, 'deploy/0001/tree/etc');
    fs.mkdirSync(path.join(live, 'app.d'));
    fs.writeFileSync(path.join(live, 'app.d/local.conf'), 'mine\n');
    const layer = path.join(base, 'layer');
    buildTree(layer, { 'etc/app.d': 'a file in the update\n' });
    const r = await cli(['stage', layer, ...S()]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/Merge conflicts found[\s\S]*etc\/app\.d/);

    const spec = write('u.json', { files: [{ path: '/etc/later.conf', contents: 'managed\n' }] });
    expect((await cli(['stage', spec, ...S()])).code).toBe(0);
    fs.mkdirSync(path.join(live, 'later.conf'));
    const fin = await cli(['finalize', ...S()]);
    expect(fin.code).toBe(1);
    expect(fin.err).toMatch(/etc\/later\.conf \(local directory, update file\)/);
    const st = await statusJson();
    expect(st).toMatchObject({ current: '0001', staged: null, lastFailure: { phase: 'finalize', path: 'etc/later.conf' } });
    const boot = await cli(['boot', ...S()]);
    expect(boot.code).toBe(1);
    expect(boot.err).toMatch(/last finalize FAILED[\s\S]*etc\/later\.conf/);
    expect(fs.statSync(path.join(live, 'later.conf')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(live, 'app.d/local.conf'), 'utf8')).toBe('mine\n');
  });

  it('stage --dry-run lists only the changes to the tree: entries under a shared directory are applied by finalize, not to the tree', async () => {
    const spec = write('d.json', { files: [{ path: '/etc/dry.conf', contents: 'x\n' }, { path: '/var/lib/dry', contents: 'y\n' }] });
    const r = await cli(['stage', spec, '--dry-run', '--json', ...S()]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(JSON.parse(r.out).changes.map((c: { change: string; path: string }) => `${c.change} ${c.path}`)).toEqual(['added etc/dry.conf']);
  });
});
