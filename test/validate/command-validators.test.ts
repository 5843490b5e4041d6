import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { StagedrootError } from '../../src/errors.js';
import { OUTPUT_LIMIT } from '../../src/util/bounded-output.js';
import { gone, killIfAlive } from '../helpers/processes.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

const UPDATE = { files: [{ path: '/etc/app.conf', contents: 'port = 80\n' }] };

async function failure(p: Promise<unknown>): Promise<StagedrootError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(StagedrootError);
  return err as StagedrootError;
}

describe('command validators', () => {
  it('run with the staged tree in STAGEDROOT_TREE (and the delta); exit 0 accepts', async () => {
    t = await tempSysroot({ tree: {} });
    const seen = path.join(t.scratch, 'seen');
    const script = `cat "$STAGEDROOT_TREE/etc/app.conf" > ${seen}; cat "$STAGEDROOT_DELTA" >> ${seen}; echo "$STAGEDROOT_LABEL" >> ${seen}`;
    const r = await t.sysroot.stage({ label: 'v2', ...UPDATE }, { commands: [{ command: ['sh', '-c', script] }] });
    const [conf, delta, label] = fs.readFileSync(seen, 'utf8').split('\n');
    expect([conf, label]).toEqual(['port = 80', 'v2']);
    expect(delta).toContain('etc/app.conf'); // the deployment's delta.json

    expect(t.sysroot.status().staged).toBe(r.id);
  });

  it('a non-zero exit rejects the update; its output is kept in the failure record', async () => {
    t = await tempSysroot({ tree: {} });
    const err = await failure(t.sysroot.stage(UPDATE, { commands: [{ name: 'port-check', command: ['sh', '-c', 'echo checking ports; echo "port 80 is privileged" >&2; exit 7'] }] }));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.issues).toEqual([{ code: 'VALIDATOR_FAILED', path: '', message: 'validator port-check exited 7: port 80 is privileged', severity: 'error' }]);
    const f = t.sysroot.status().lastFailure!;
    expect(f.phase).toBe('validate');
    expect(f.output).toBe('--- validator port-check (exited 7) ---\nchecking ports\nport 80 is privileged\n');
  });

  it('bounds the captured output (first and last halves kept)', async () => {
    t = await tempSysroot({ tree: {} });
    const script = 'echo FIRST; head -c 1000000 /dev/zero | tr "\\0" x; echo; echo LAST; exit 1';
    await failure(t.sysroot.stage(UPDATE, { commands: [{ command: ['sh', '-c', script] }] }));
    const out = t.sysroot.status().lastFailure!.output!;
    expect(out.length).toBeLessThan(OUTPUT_LIMIT + 200);
    expect(out).toContain('FIRST');
    expect(out).toContain('LAST');
    expect(out).toMatch(/\[\.\.\. \d+ bytes of output dropped \.\.\.\]/);
  });

  it('a validator that runs out of time is killed with its children and rejects the update', async () => {
    t = await tempSysroot({ tree: {} });
    const pidFile = path.join(t.scratch, 'sleep.pid');
    // The sleep outlives the test's timeout (60 s): a stage that waited for it fails by timing out.
    const script = `echo waiting; sleep 120 & echo $! > ${pidFile}; wait; echo never`;
    const err = await failure(t.sysroot.stage(UPDATE, { commands: [{ command: ['sh', '-c', script], timeoutMs: 300 }] }));
    expect(err.issues[0]).toMatchObject({ code: 'VALIDATOR_TIMEOUT', message: expect.stringContaining('timed out after 0.3s: waiting') });
    expect(t.sysroot.status().lastFailure!.output!.split('---\n')[1]).toBe('waiting\n'); // never reached its last line
    const sleep = Number(fs.readFileSync(pidFile, 'utf8'));
    try {
      expect(await gone(sleep)).toBe(true);
    } finally {
      killIfAlive(sleep);
    }
  });

  it('a validator that cannot be run is TOOL_MISSING (the machine, not the update)', async () => {
    t = await tempSysroot({ tree: {} });
    const err = await failure(t.sysroot.stage(UPDATE, { commands: ['/nonexistent/check --strict'] }));
    expect(err.code).toBe('TOOL_MISSING');
    expect(err.message).toContain('/nonexistent/check');
  });
});

describe('command validator options', () => {
  it('are checked before anything is built or recorded (USAGE naming the option)', async () => {
    t = await tempSysroot({ tree: {} });
    const err = await failure(t.sysroot.stage(UPDATE, { commands: [{ command: 'true', timeoutMs: -1 }] }));
    expect(err).toMatchObject({ code: 'USAGE', option: 'commands[0].timeoutMs' });
    expect(err.message).toBe('Expected the `commands[0].timeoutMs` option to be a positive integer of milliseconds, got `-1` (number)');
    expect(t.sysroot.status().lastFailure).toBeNull();
    const bad = async (commands: unknown): Promise<string> => (await failure(t!.sysroot.stage(UPDATE, { commands: commands as string[] }))).message;
    expect(await bad(['true', '  '])).toBe('Expected the `commands[1]` option to be a command line or an array of strings naming an executable, got `  ` (string)');
    expect(await bad('true')).toBe('Expected the `commands` option to be an array of commands or { command, name?, timeoutMs? } objects, got `true` (string)');
    expect(await bad([{ command: 42 }])).toBe('Expected the `commands[0].command` option to be a command line or an array of strings naming an executable, got `42` (number)');
    expect(await bad([{ command: 'true', timeoutMs: '5' }])).toBe('Expected the `commands[0].timeoutMs` option to be a positive integer of milliseconds, got `5` (string)');
    expect(await bad([null])).toBe('Expected the `commands[0]` option to be a command or a { command, name?, timeoutMs? } object, got `null` (null)');
    expect(t.sysroot.status().lastFailure).toBeNull();
    expect(fs.readdirSync(path.join(t.dir, 'deploy'))).toEqual(['0001']);
  });
});
