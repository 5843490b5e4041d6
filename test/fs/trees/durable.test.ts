import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fsyncPaths, optionUnsupported, syncFilesystem } from '../../../src/fs/trees/durable.js';
import { StagedrootError } from '../../../src/errors.js';
import { tempSysroot, type TempSysroot } from '../../../src/testing/index.js';
import { motdUpdate } from '../../helpers/trees.js';

/**
 * syncFilesystem against fake sync(1) commands put first on PATH: one whose syncfs fails
 * with EIO (as a writeback error is reported), one too old to know `-f` (the usage error
 * of coreutils < 8.24). Each logs how it was called.
 */
const EIO_SYNC = `#!/bin/sh
echo "\${*:-(no operands)}" >> "$SYNC_LOG"
if [ "$1" = -f ]; then echo "sync: error syncing '$2': Input/output error" >&2; exit 1; fi
exit 0
`;
const OLD_SYNC = `#!/bin/sh
echo "\${*:-(no operands)}" >> "$SYNC_LOG"
if [ "$1" = -f ]; then printf "sync: invalid option -- 'f'\\nTry 'sync --help' for more information.\\n" >&2; exit 1; fi
exit 0
`;
/** The real sync, each call logged. */
const LOGGING_SYNC = `#!/bin/sh
echo "\${*:-(no operands)}" >> "$SYNC_LOG"
exec /bin/sync "$@"
`;
const ENOSPC_SYNC = `#!/bin/sh
echo "\${*:-(no operands)}" >> "$SYNC_LOG"
if [ "$1" = -f ]; then echo "sync: error syncing '$2': No space left on device" >&2; exit 1; fi
exit 0
`;

let dir: string;
let log: string;
const saved = { PATH: process.env.PATH, SYNC_LOG: process.env.SYNC_LOG };

function useFakeSync(script: string): void {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.writeFileSync(path.join(bin, 'sync'), script, { mode: 0o755 });
  process.env.PATH = `${bin}:${saved.PATH}`;
}

const calls = (): string[] => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : []);

async function syncError(p: Promise<unknown>): Promise<StagedrootError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(StagedrootError);
  return err as StagedrootError;
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-sync-'));
  log = path.join(dir, 'calls.log');
  process.env.SYNC_LOG = log;
});
afterEach(() => {
  process.env.PATH = saved.PATH;
  if (saved.SYNC_LOG === undefined) delete process.env.SYNC_LOG;
  else process.env.SYNC_LOG = saved.SYNC_LOG;
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('syncFilesystem', () => {
  it('syncs with the real sync -f', async () => {
    fs.writeFileSync(path.join(dir, 'f'), 'x');
    await expect(syncFilesystem(dir)).resolves.toBeUndefined();
  });

  it('fails with IO when syncfs reports an I/O error, and does not fall back to a global sync', async () => {
    useFakeSync(EIO_SYNC);
    const err = await syncError(syncFilesystem(dir));
    expect(err.code).toBe('IO');
    expect(err.errno).toBe('EIO');
    expect(err.path).toBe(dir);
    expect(err.message).toBe(`Cannot make ${dir} durable: sync failed (sync: error syncing '${dir}': Input/output error)`);
    expect(calls()).toEqual([`-f ${dir}`]);
  });

  it('fails with NO_SPACE when writeback ran out of space', async () => {
    useFakeSync(ENOSPC_SYNC);
    const err = await syncError(syncFilesystem(dir));
    expect(err).toMatchObject({ code: 'NO_SPACE', errno: 'ENOSPC', path: dir });
    expect(calls()).toEqual([`-f ${dir}`]);
  });

  it('falls back to a global sync only when sync does not know -f', async () => {
    useFakeSync(OLD_SYNC);
    await expect(syncFilesystem(dir)).resolves.toBeUndefined();
    expect(calls()).toEqual([`-f ${dir}`, '(no operands)']);
  });

  it('says TOOL_MISSING when there is no sync at all', async () => {
    process.env.PATH = path.join(dir, 'empty');
    const err = await syncError(syncFilesystem(dir));
    expect(err.code).toBe('TOOL_MISSING');
  });

  it('recognises the usage errors of coreutils and busybox, and nothing else', () => {
    expect(optionUnsupported("sync: invalid option -- 'f'\nTry 'sync --help' for more information.")).toBe(true);
    expect(optionUnsupported("sync: unrecognized option '--file-system'")).toBe(true);
    expect(optionUnsupported("sync: invalid option -- 'f'\nBusyBox v1.22.1 multi-call binary.\n\nUsage: sync")).toBe(true);
    expect(optionUnsupported("sync: error syncing '/s/work/0002': Input/output error")).toBe(false);
    expect(optionUnsupported("sync: error opening '/s/work/0002': No such file or directory")).toBe(false);
    expect(optionUnsupported('')).toBe(false);
  });
});

describe('a stage whose sync fails', () => {
  let t: TempSysroot;
  afterEach(() => t?.cleanup());

  it('is recorded in phase sync with code IO, and its tree is never renamed into deploy/', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    const staged = await t.sysroot.stage(motdUpdate('A'));
    useFakeSync(EIO_SYNC);
    const err = await syncError(t.sysroot.stage(motdUpdate('B')));
    expect(err.code).toBe('IO');
    expect(t.sysroot.status()).toMatchObject({ staged: staged.id, lastFailure: { id: '0003', phase: 'apply', step: 'sync', code: 'IO' } });
    expect(fs.readdirSync(path.join(t.dir, 'deploy')).sort()).toEqual(['0001', staged.id]);
    expect(fs.readdirSync(path.join(t.dir, 'work'))).toEqual([]);
    expect(calls()).toEqual([`-f ${path.join(t.dir, 'work', '0003')}`]);
  });

  it('does not keep a rejected tree it cannot make durable (removed, with a warning)', async () => {
    const warnings: string[] = [];
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' }, onWarning: (w) => warnings.push(w) });
    useFakeSync(EIO_SYNC);
    const reject = { name: 'no-motd', run: () => [{ code: 'NO', path: 'etc/motd', message: 'no', severity: 'error' as const }] };
    const err = await syncError(t.sysroot.stage(motdUpdate('B'), { validators: [reject] }));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(t.sysroot.status().lastFailure).toMatchObject({ id: '0002', phase: 'validate', step: 'validate' });
    expect(t.sysroot.state().deployments.map((d) => d.id)).toEqual(['0001']);
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual(['0001']);
    expect(warnings.join('\n')).toMatch(/could not sync the rejected tree .*work\/0002 .*Input\/output error.*removed rather than kept/);
  });
});

describe('fsyncPaths', () => {
  it('fsyncs files and directories, and names the path it cannot make durable', async () => {
    fs.writeFileSync(path.join(dir, 'f'), 'x');
    await expect(fsyncPaths([path.join(dir, 'f'), dir])).resolves.toBeUndefined();
    const err = await syncError(fsyncPaths([path.join(dir, 'missing')]));
    expect(err).toMatchObject({ code: 'IO', path: path.join(dir, 'missing'), errno: 'ENOENT' });
    expect(err.message).toMatch(/^Cannot make .*missing durable: /);
  });
});

describe('a stage\'s tree sync', () => {
  let t: TempSysroot;
  afterEach(() => t?.cleanup());

  it('starts once the change set is applied (validators run after it began); then only the manifest and the work dir are fsynced', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    useFakeSync(LOGGING_SYNC);
    const seen: string[][] = [];
    const spy = { name: 'sees-sync', run: () => (seen.push(calls()), []) };
    const r = await t.sysroot.stage(motdUpdate('B'), { validators: [spy] });
    const work = path.join(t.dir, 'work', r.id);
    expect(seen).toEqual([[`-f ${work}`]]);
    expect(calls()).toEqual([`-f ${work}`]); // one sync -f in all
    expect(fs.readFileSync(path.join(t.dir, 'deploy', r.id, 'tree/etc/motd'), 'utf8')).toBe('motd of B\n');
  });

  it('syncs everything again after command validators (an executable could write into the tree)', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    useFakeSync(LOGGING_SYNC);
    const r = await t.sysroot.stage(motdUpdate('B'), { commands: [{ command: ['sh', '-c', 'true'] }] });
    const work = path.join(t.dir, 'work', r.id);
    expect(calls()).toEqual([`-f ${work}`, `-f ${work}`]);
  });

  it("a failure of the early sync is the sync step's, reported when the stage reaches it", async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    useFakeSync(ENOSPC_SYNC);
    const validated: boolean[] = [];
    const spy = { name: 'runs-first', run: () => (validated.push(true), []) };
    const err = await syncError(t.sysroot.stage(motdUpdate('B'), { validators: [spy] }));
    expect(err.code).toBe('NO_SPACE');
    expect(validated).toEqual([true]);
    expect(t.sysroot.status().lastFailure).toMatchObject({ phase: 'apply', step: 'sync', code: 'NO_SPACE' });
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual(['0001']);
  });
});
