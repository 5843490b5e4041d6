import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { assessHealth } from '../../src/assess-health.js';
import { runHealthChecks } from '../../src/boot/health.js';
import { StagedrootError } from '../../src/errors.js';
import { cli } from '../helpers/cli.js';
import { gone, killIfAlive } from '../helpers/processes.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

/** A sysroot whose v2 update has been finalized and booted (under assessment). */
async function bootedUpdate(): Promise<TempSysroot> {
  const s = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\nVERSION=1\n' } });
  await s.sysroot.stage({ label: 'v2', files: [{ path: '/etc/os-release', contents: 'ID=test\nVERSION=2\n' }] });
  const r = await reboot(s.sysroot);
  expect(r.boot.event).toMatchObject({ kind: 'booted', id: '0002' });
  return s;
}

function script(dir: string, name: string, body: string, mode = 0o755): string {
  fs.mkdirSync(dir, { recursive: true });
  const p = path.join(dir, name);
  fs.writeFileSync(p, `#!/bin/sh\n${body}\n`, { mode });
  return p;
}

describe('health checks (greenboot-style boot assessment)', () => {
  it('a failing required check after finalize + boot: marked bad (phase health, output kept), the next boot runs the old deployment', async () => {
    t = await bootedUpdate();
    const r = await assessHealth(t.sysroot, { required: [{ name: 'app-up', command: ['sh', '-c', 'echo "app: connection refused" >&2; exit 2'] }] });
    expect(r.action).toBe('marked-bad');
    expect(r.status).toMatchObject({ booted: '0002', current: '0001', pendingReboot: true });
    const f = r.status.lastFailure!;
    expect(f).toMatchObject({ id: '0002', label: 'v2', phase: 'health', reason: 'required health check failed: app-up (exited 2)' });
    expect(f.output).toBe('--- required check app-up (exited 2) ---\napp: connection refused\n');

    const next = await t.sysroot.boot();
    expect(next.event).toEqual({ kind: 'booted', id: '0001', triesLeft: null });
    const st = t.sysroot.status();
    expect(st).toMatchObject({ booted: '0001', current: '0001', pendingReboot: false });
    expect(st.lastFailure!.phase).toBe('health');
    expect(fs.readFileSync(path.join(t.dir, 'current/etc/os-release'), 'utf8')).toContain('VERSION=1');
  });

  it('passing required checks mark the deployment good; a failing wanted check is reported, not fatal', async () => {
    t = await bootedUpdate();
    const r = await assessHealth(t.sysroot, {
      required: [{ command: ['sh', '-c', 'test "$STAGEDROOT_DEPLOYMENT" = 0002 && test -f "$STAGEDROOT_TREE/etc/os-release"'] }],
      wanted: [{ name: 'metrics', command: ['sh', '-c', 'echo degraded; exit 1'] }],
    });
    expect(r.action).toBe('marked-good');
    expect(r.report.failedWanted).toEqual([expect.objectContaining({ name: 'metrics', kind: 'wanted', outcome: 'exited 1', output: 'degraded\n' })]);
    expect(r.status.deployments.find((d) => d.id === '0002')).toMatchObject({ good: true, triesLeft: null });
    expect(r.status.lastFailure).toBeNull();
  });

  it('runs the executables of required.d and wanted.d in name order, skipping non-executables', async () => {
    t = await tempSysroot({ tree: {} });
    const log = path.join(t.scratch, 'log');
    const req = path.join(t.scratch, 'required.d');
    const want = path.join(t.scratch, 'wanted.d');
    script(req, '20-second', `echo 20 >> ${log}`);
    script(req, '10-first', `echo 10 >> ${log}`);
    script(req, 'README', `echo never >> ${log}`, 0o644);
    script(want, '50-wanted', `echo 50 >> ${log}; exit 3`);
    const rep = await runHealthChecks({ requiredDirs: [req], wantedDirs: [want] });
    expect(fs.readFileSync(log, 'utf8')).toBe('10\n20\n50\n');
    expect(rep.results.map((r) => [r.kind, r.name, r.ok])).toEqual([
      ['required', 'required.d/10-first', true],
      ['required', 'required.d/20-second', true],
      ['wanted', 'wanted.d/50-wanted', false],
    ]);
    expect(rep.ok).toBe(true);
  });

  it('a check that runs out of time fails (its children killed too)', async () => {
    t = await tempSysroot({ tree: {} });
    const pidFile = path.join(t.scratch, 'child.pid');
    // The background sleep holds the output pipe and outlives the test's timeout (60 s): a run
    // that waited for it, or for the pipe it holds, fails by timing out instead of returning.
    const rep = await runHealthChecks({ required: [{ command: ['sh', '-c', `sleep 120 & echo $! > ${pidFile}; wait`], timeoutMs: 300 }] });
    expect(rep.failedRequired[0]).toMatchObject({ timedOut: true, outcome: 'timed out after 0.3s' });
    const child = Number(fs.readFileSync(pidFile, 'utf8'));
    try {
      expect(await gone(child)).toBe(true);
    } finally {
      killIfAlive(child);
    }
  });

  it('checks its options before running any check, naming the option, the value and its type', async () => {
    const usage = async (o: Parameters<typeof runHealthChecks>[0]): Promise<string> => {
      const err = await runHealthChecks(o).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(StagedrootError);
      expect((err as StagedrootError).code).toBe('USAGE');
      return (err as StagedrootError).message;
    };
    expect(await usage({ timeoutMs: 0 })).toBe('Expected the `timeoutMs` option to be a positive integer of milliseconds, got `0` (number)');
    expect(await usage({ required: ['true', { command: 'true', timeoutMs: 1.5 }] })).toBe('Expected the `required[1].timeoutMs` option to be a positive integer of milliseconds, got `1.5` (number)');
    expect(await usage({ wanted: [' '] })).toBe('Expected the `wanted[0]` option to be a command line or an array of strings naming an executable, got ` ` (string)');
  });

  it('a required check directory that does not exist is a usage error (a typo must not pass)', async () => {
    await expect(runHealthChecks({ requiredDirs: ['/nonexistent/required.d'] })).rejects.toMatchObject({ code: 'USAGE' });
    // The defaults the CLI uses may be absent: no checks.
    expect((await runHealthChecks({ optionalDirs: { required: ['/nonexistent/required.d'] } })).results).toEqual([]);
  });

  it('does not roll back a deployment that was already marked good; does not re-bless one marked bad', async () => {
    t = await bootedUpdate();
    await t.sysroot.markGood();
    const r = await assessHealth(t.sysroot, { required: ['false'] });
    expect(r.action).toBe('failed-on-good');
    expect(r.status).toMatchObject({ booted: '0002', current: '0002', lastFailure: null });

    const u = await bootedUpdate();
    try {
      await assessHealth(u.sysroot, { required: ['false'] });
      const again = await assessHealth(u.sysroot, { required: ['true'] }).catch((e: unknown) => e);
      expect(again).toBeInstanceOf(StagedrootError);
      expect((again as StagedrootError).code).toBe('INVALID_TRANSITION');
      expect(u.sysroot.status().current).toBe('0001');
    } finally {
      u.cleanup();
    }
  });
});

describe('stagedroot health (CLI)', () => {
  it('marks good with exit 0, or bad with exit 1 printing the failed check and its output', async () => {
    t = await bootedUpdate();
    const req = path.join(t.scratch, 'required.d');
    script(req, '10-app', 'echo "app not listening on :8080"; exit 1');
    let r = await cli(['health', '--required-dir', req, '--sysroot', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('FAIL required required.d/10-app (exited 1');
    expect(r.err).toContain('app not listening on :8080');
    expect(r.out).toContain('deployment 0002 marked bad; deployment 0001 runs at the next boot');
    r = await cli(['status', '--json', '--sysroot', t.dir]);
    expect(JSON.parse(r.out).lastFailure).toMatchObject({ phase: 'health', output: expect.stringContaining('app not listening') });

    r = await cli(['boot', '--sysroot', t.dir]);
    expect(r.out).toContain('booted deployment 0001');
    r = await cli(['health', '--check', 'true', '--wanted-check', 'false', '--json', '--sysroot', t.dir]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ ok: true, action: 'marked-good', results: [{ kind: 'required', ok: true }, { kind: 'wanted', ok: false }] });
  });
});
