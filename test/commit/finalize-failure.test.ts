import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hashTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { StagedrootError } from '../../src/errors.js';
import { cli } from '../helpers/cli.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

describe('a finalize that fails', () => {
  it('leaves current unchanged, is recorded durably, and the next boot reports it (CLI exit 1 with the reason)', async () => {
    t = await tempSysroot({ tree: { 'etc/app.conf': 'v1\n', 'usr/bin/app': 'app' } });
    const staged = await t.sysroot.stage({ label: 'v2', files: [{ path: '/etc/app.conf', contents: 'v2\n' }] });
    const currentTree = fs.realpathSync(path.join(t.dir, 'current'));
    const before = hashTree(currentTree);
    // The staged tree no longer matches its manifest: a file the update changed is tampered with.
    fs.writeFileSync(path.join(staged.path, 'etc/app.conf'), 'tampered\n');

    const err = (await t.sysroot.finalize().catch((e: unknown) => e)) as StagedrootError;
    expect(err).toBeInstanceOf(StagedrootError);
    expect(err.code).toBe('FINALIZE_FAILED');
    expect(err.message).toContain('etc/app.conf');
    expect(fs.realpathSync(path.join(t.dir, 'current'))).toBe(currentTree);
    expect(hashTree(currentTree)).toBe(before);
    let st = t.sysroot.status();
    expect(st).toMatchObject({ current: '0001', staged: null, pendingReboot: false });
    expect(st.lastFailure).toMatchObject({ id: staged.id, phase: 'finalize', code: 'FINALIZE_FAILED' });
    expect(st.finalizeFailure).toMatchObject({ id: staged.id, reported: false });

    // The next boot: the old deployment, and the failure printed loudly (once).
    const r = await cli(['boot', '--sysroot', t.dir]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('booted deployment 0001');
    expect(r.err).toContain(`the last finalize FAILED for deployment ${staged.id} (v2)`);
    expect(r.err).toContain('the staged tree no longer matches its manifest: etc/app.conf');
    st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0001' });
    expect(st.finalizeFailure).toMatchObject({ reported: true });
    expect((await cli(['boot', '--sysroot', t.dir])).code).toBe(0);
  });

  it('the CLI finalize exits 1 with the reason', async () => {
    t = await tempSysroot({ tree: { 'etc/app.conf': 'v1\n' } });
    const staged = await t.sysroot.stage({ files: [{ path: '/etc/app.conf', contents: 'v2\n' }] });
    fs.rmSync(path.join(staged.path, 'etc/app.conf'));
    const r = await cli(['finalize', '--sysroot', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('FINALIZE_FAILED');
    expect(r.err).toContain('current stays 0001');
  });

  it('fullVerify checks the whole staged tree (drift outside the delta) and the manifest\'s checksum', async () => {
    t = await tempSysroot({ tree: { 'etc/app.conf': 'v1\n', 'usr/share/data': 'data\n' } });
    const staged = await t.sysroot.stage({ files: [{ path: '/etc/app.conf', contents: 'v2\n' }] });
    // A path the update did not touch (a copy, not a hardlink, so the booted tree keeps its own).
    fs.rmSync(path.join(staged.path, 'usr/share/data'));
    fs.writeFileSync(path.join(staged.path, 'usr/share/data'), 'changed\n');
    await expect(t.sysroot.finalize({ fullVerify: true })).rejects.toMatchObject({ code: 'FINALIZE_FAILED', message: expect.stringContaining('the staged tree no longer matches its manifest: usr/share/data') });
    expect(t.sysroot.status()).toMatchObject({ current: '0001', staged: null });

    const again = await t.sysroot.stage({ files: [{ path: '/etc/app.conf', contents: 'v3\n' }] });
    const manifest = path.join(t.dir, 'deploy', again.id, 'manifest.ndjson');
    // Replaced, not written in place: the file may be a link its base deployment shares
    // (see linked-manifest.ts; an in-place write would change the base's manifest too).
    const text = fs.readFileSync(manifest, 'utf8').replace('"m":420', '"m":384');
    fs.rmSync(manifest);
    fs.writeFileSync(manifest, text);
    await expect(t.sysroot.finalize({ fullVerify: true })).rejects.toMatchObject({ code: 'FINALIZE_FAILED', message: expect.stringContaining('was modified after staging') });

    const last = await t.sysroot.stage({ files: [{ path: '/etc/app.conf', contents: 'v4\n' }] });
    await expect(t.sysroot.finalize({ fullVerify: true })).resolves.toMatchObject({ finalized: true, id: last.id });
  });
});
