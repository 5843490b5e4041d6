import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildTree, hashTree } from '../../src/testing/index.js';
import { buildProgram } from '../../src/cli/program.js';
import { cli, cliProcess } from '../helpers/cli.js';
import { acquireLock } from '../../src/fs/lock/writer-lock.js';

let base: string;
let sysroot: string;
const write = (name: string, doc: unknown): string => {
  const p = path.join(base, name);
  fs.writeFileSync(p, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return p;
};

beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-cli-'));
  sysroot = path.join(base, 'sysroot');
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

async function initFromTree(): Promise<void> {
  const tree = buildTree(path.join(base, 'tree'), {
    'usr/bin/app': { content: 'v1', mode: 0o755 },
    'etc/os-release': 'ID=test\n',
    'home/core/test': 'a file\n',
  });
  const r = await cli(['init', '--from', tree, '--label', 'base', '--sysroot', sysroot]);
  expect(r.code, r.err).toBe(0);
}

describe('stagedroot CLI', () => {
  it('runs the whole lifecycle with the exit codes of docs/errors.md', async () => {
    await initFromTree();
    const good = write('good.json', { label: 'v2', files: [{ path: '/etc/app.conf', contents: 'x=1\n' }] });
    let r = await cli(['stage', good, '--sysroot', sysroot]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('staged deployment 0002 (v2)');

    r = await cli(['status', '--json', '--sysroot', sysroot]);
    const st = JSON.parse(r.out);
    expect(st).toMatchObject({ booted: '0001', current: '0001', staged: '0002', rollback: null, pendingReboot: false, lastFailure: null });
    expect(st.deployments.map((d: { id: string }) => d.id)).toEqual(['0002', '0001']);
    expect(path.isAbsolute(st.deployments[0].path)).toBe(true);

    expect((await cli(['finalize', '--sysroot', sysroot])).code).toBe(0);
    r = await cli(['status', '--json', '--sysroot', sysroot]);
    expect(JSON.parse(r.out)).toMatchObject({ booted: '0001', current: '0002', staged: null, rollback: '0001', pendingReboot: true });
    r = await cli(['boot', '--sysroot', sysroot]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('booted deployment 0002 (2 boot tries left');
    expect((await cli(['mark-good', '--sysroot', sysroot])).code).toBe(0);

    r = await cli(['diff', '0001', '0002', '--json', '--sysroot', sysroot]);
    expect(JSON.parse(r.out).changes).toEqual([{ path: 'etc/app.conf', change: 'added' }]);
    r = await cli(['verify', '--sysroot', sysroot]);
    expect(r.code).toBe(0);

    // Nothing staged: finalize exits 0 and says so.
    r = await cli(['finalize', '--sysroot', sysroot]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('nothing staged');

    r = await cli(['rollback', '--json', '--sysroot', sysroot]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ current: '0001', booted: '0002', rollback: '0002', pendingReboot: true });
  });

  it('rejects the MCD deadlock update with exit 3, naming the path, the booted tree untouched', async () => {
    await initFromTree();
    const booted = path.join(sysroot, 'deploy/0001/tree');
    const before = hashTree(booted);
    const bad = write('bad.json', { files: [{ path: '/home/core/test/test', contents: 'x' }] });
    const r = await cli(['stage', bad, '--sysroot', sysroot]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('home/core/test/test');
    expect(r.err).toContain('ENOTDIR');
    expect(hashTree(booted)).toBe(before);
    const st = JSON.parse((await cli(['status', '--json', '--sysroot', sysroot])).out);
    expect(st.lastFailure).toMatchObject({ id: '0002', phase: 'apply' });
    expect(st.deployments.find((d: { id: string }) => d.id === '0002')).toMatchObject({ failed: true, status: 'failed' });

    const fixed = write('fixed.json', { remove: ['/home/core/test'], files: [{ path: '/home/core/test/test', contents: 'x' }] });
    expect((await cli(['stage', fixed, '--sysroot', sysroot])).code).toBe(0);
    const after = JSON.parse((await cli(['status', '--json', '--sysroot', sysroot])).out);
    expect(after.lastFailure).toBeNull();
    expect(after.deployments.map((d: { id: string }) => d.id)).toEqual(['0003', '0001']);
  });

  it('lists every bad field of a malformed spec and exits 3', async () => {
    await initFromTree();
    const bad = write('bad.json', { files: [{ path: '/etc/a', contents: 1, mode: 'rwx' }, { path: '../x', contents: 'y', color: 'red' }], bogus: true });
    const r = await cli(['stage', bad, '--sysroot', sysroot]);
    expect(r.code).toBe(3);
    for (const field of ['files[0].contents', 'files[0].mode', 'files[1].path', 'files[1]', 'bogus']) expect(r.err).toContain(field);
    const notJson = write('broken.json', '{ "files": [ ');
    expect((await cli(['stage', notJson, '--sysroot', sysroot])).code).toBe(3);
  });

  it('gives usage errors exit 2 and names the bad option', async () => {
    expect((await cli(['frobnicate'])).code).toBe(2);
    const r = await cli(['status']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--sysroot');
    await initFromTree();
    const p = await cli(['prune', '--keep', '-1', '--sysroot', sysroot]);
    expect(p.code).toBe(2);
    const w = await cli(['status', '--wait', 'soon', '--sysroot', sysroot]);
    expect(w.code).toBe(2);
    // --wait is checked by the library's one check of waitSeconds, named as the flag, shown as typed.
    expect(w.err).toContain('Expected the `--wait` option to be a non-negative number of seconds, got `soon` (string)');
    expect((await cli(['status', '--wait', '-1', '--sysroot', sysroot])).err).toContain('got `-1` (string)');
  });

  it('takes the sysroot from STAGEDROOT_SYSROOT', async () => {
    await initFromTree();
    const r = await cli(['status', '--json'], { STAGEDROOT_SYSROOT: sysroot });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).current).toBe('0001');
  });

  it('exits 1 for a missing sysroot and for a drifted tree', async () => {
    const r = await cli(['status', '--sysroot', path.join(base, 'nope')]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('NOT_A_SYSROOT');
    await initFromTree();
    fs.writeFileSync(path.join(sysroot, 'deploy/0001/tree/etc/os-release'), 'ID=tampered\n');
    const v = await cli(['verify', '--json', '--sysroot', sysroot]);
    expect(v.code).toBe(1);
    expect(JSON.parse(v.out).drift).toEqual([expect.objectContaining({ path: 'etc/os-release', kind: 'content' })]);
  });

  it('answers a second writer with exit 4 (busy), or waits with --wait', async () => {
    await initFromTree();
    const lock = await acquireLock(sysroot, { operation: 'test-holder' });
    try {
      const spec = write('s.json', { files: [{ path: '/etc/x', contents: 'x' }] });
      const r = cliProcess(['stage', spec, '--sysroot', sysroot]);
      expect(r.code).toBe(4);
      expect(r.err).toContain('busy');
      expect(r.err).toContain('test-holder');
      // Readers never block.
      expect(cliProcess(['status', '--sysroot', sysroot]).code).toBe(0);
      setTimeout(() => lock.release(), 300);
      const waited = await cli(['stage', spec, '--wait', '10', '--sysroot', sysroot]);
      expect(waited.code, waited.err).toBe(0);
    } finally {
      lock.release();
    }
  });

  it('prints --help for every verb', async () => {
    // The verbs come from the program itself, so a new one cannot be missed here.
    const verbs = (await buildProgram({ io: { out: () => {}, err: () => {}, errIsTty: false, env: {} }, exitCode: 0 })).commands.map((c) => c.name());
    expect(verbs).toEqual(expect.arrayContaining(['init', 'stage', 'finalize', 'health', 'unlock', 'pin', 'unpin']));
    const top = await cli(['--help']);
    expect(top.code).toBe(0);
    for (const verb of verbs) {
      expect(top.out, verb).toMatch(new RegExp(`^  ${verb}\\b`, 'm'));
      const r = await cli([verb, '--help']);
      expect(r.code, verb).toBe(0);
      expect(r.out, verb).toContain(`Usage: stagedroot ${verb}`);
      expect(r.out, verb).toContain('--sysroot');
    }
  });

  it('keeps a finalization-locked stage until unlock', async () => {
    await initFromTree();
    const spec = write('s.json', { files: [{ path: '/etc/x', contents: 'x' }] });
    expect((await cli(['stage', spec, '--lock', '--sysroot', sysroot])).code).toBe(0);
    let r = await cli(['finalize', '--sysroot', sysroot]);
    expect(r.out).toContain('finalization-locked');
    expect(JSON.parse((await cli(['status', '--json', '--sysroot', sysroot])).out)).toMatchObject({ staged: '0002', current: '0001', finalizationLocked: true });
    expect((await cli(['unlock', '--sysroot', sysroot])).code).toBe(0);
    r = await cli(['finalize', '--sysroot', sysroot]);
    expect(JSON.parse((await cli(['status', '--json', '--sysroot', sysroot])).out)).toMatchObject({ staged: null, current: '0002' });
  });

  it('runs as a real process with the same exit codes', () => {
    const r = cliProcess(['status', '--sysroot', path.join(base, 'none')]);
    expect(r.code).toBe(1);
    expect(cliProcess(['--version']).out.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('read-only verbs', () => {
  it('status, diff and verify work on a read-only sysroot and write nothing', async () => {
    await initFromTree();
    const spec = write('s.json', { files: [{ path: '/etc/x', contents: 'x' }] });
    expect((await cli(['stage', spec, '--sysroot', sysroot])).code).toBe(0);
    const snapshot = (): string[] => fs.readdirSync(sysroot).sort();
    const before = snapshot();
    const mtime = fs.statSync(sysroot).mtimeMs;
    fs.chmodSync(sysroot, 0o555);
    try {
      expect((await cli(['status', '--json', '--sysroot', sysroot])).code).toBe(0);
      expect((await cli(['diff', '0001', '0002', '--sysroot', sysroot])).code).toBe(0);
      expect((await cli(['verify', '0002', '--sysroot', sysroot])).code).toBe(0);
    } finally {
      fs.chmodSync(sysroot, 0o755);
    }
    expect(snapshot()).toEqual(before);
    expect(fs.statSync(sysroot).mtimeMs).toBe(mtime);
  });
});

describe('stage sources through the CLI', () => {
  it('records content it cannot recognise as a failed stage (exit 3) and a missing path as a usage error (exit 2)', async () => {
    await initFromTree();
    const junk = write('junk.bin', 'PK\x03\x04 not an update');
    const r = await cli(['stage', junk, '--sysroot', sysroot]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('SOURCE_UNSUPPORTED');
    const st = JSON.parse((await cli(['status', '--json', '--sysroot', sysroot])).out);
    expect(st.lastFailure).toMatchObject({ phase: 'apply', step: 'plan', code: 'SOURCE_UNSUPPORTED' });
    expect((await cli(['stage', path.join(base, 'missing.json'), '--sysroot', sysroot])).code).toBe(2);
  });

  it('takes a directory as a layer, or as the whole tree with --replace', async () => {
    await initFromTree();
    const layer = buildTree(path.join(base, 'layer'), { 'etc/new.conf': 'n=1\n' });
    expect((await cli(['stage', layer, '--sysroot', sysroot])).code).toBe(0);
    const staged = path.join(sysroot, 'deploy/0002/tree');
    expect(fs.readFileSync(path.join(staged, 'etc/new.conf'), 'utf8')).toBe('n=1\n');
    expect(fs.existsSync(path.join(staged, 'usr/bin/app'))).toBe(true);
    // The whole new tree lacks the booted tree's etc/os-release: the default required-path check would reject it.
    const r = await cli(['stage', layer, '--replace', '--no-check-required', '--sysroot', sysroot]);
    expect(r.code, r.err).toBe(0);
    const replaced = path.join(sysroot, 'deploy/0003/tree');
    expect(fs.readdirSync(replaced)).toEqual(['etc', 'var']); // var: the shared /var's mount point
    expect(fs.readdirSync(path.join(replaced, 'etc'))).toEqual(['new.conf']);
    const spec = write('s.json', { files: [{ path: '/etc/x', contents: 'x' }] });
    expect((await cli(['stage', spec, '--replace', '--sysroot', sysroot])).code).toBe(2);
  });
});

describe('failed deployments', () => {
  it('verify and diff of a deployment that failed before its manifest say so, naming the failure', async () => {
    await initFromTree();
    const bad = write('bad.json', { files: [{ path: '/home/core/test/test', contents: 'x' }] });
    expect((await cli(['stage', bad, '--sysroot', sysroot])).code).toBe(3);
    const r = await cli(['verify', '0002', '--sysroot', sysroot]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('NO_MANIFEST');
    expect(r.err).toContain('failed in apply');
    expect((await cli(['diff', '0001', '0002', '--sysroot', sysroot])).err).toContain('NO_MANIFEST');
  });
});

describe('machine faults are not rejections', () => {
  it('a state file that cannot be written fails finalize with exit 1 (IO), not 3', async () => {
    await initFromTree();
    const spec = write('s.json', { files: [{ path: '/etc/x', contents: 'x' }] });
    expect((await cli(['stage', spec, '--sysroot', sysroot])).code).toBe(0);
    const bak = path.join(sysroot, 'state.json.bak');
    fs.rmSync(bak);
    fs.mkdirSync(path.join(bak, 'blocker'), { recursive: true });
    const r = await cli(['finalize', '--sysroot', sysroot]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('IO');
    expect(r.err).not.toContain('rejected');
  });

  it('init --boot-tries 0 is a usage error naming the option, and leaves no sysroot', async () => {
    const r = await cli(['init', '--boot-tries', '0', '--sysroot', sysroot]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--boot-tries');
    expect(fs.existsSync(path.join(sysroot, 'state.json'))).toBe(false);
    expect((await cli(['init', '--boot-tries', '5', '--sysroot', sysroot])).code).toBe(0);
    expect(JSON.parse((await cli(['status', '--json', '--sysroot', sysroot])).out).bootTries).toBe(5);
  });
});
