import { afterEach, describe, expect, it } from 'vitest';
import { execaSync } from 'execa';
import { hashTree, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { StagedrootError } from '../../src/errors.js';
import { cli } from '../helpers/cli.js';

function haveSystemdAnalyze(): boolean {
  try {
    execaSync('systemd-analyze', ['--version']);
    return true;
  } catch {
    return false;
  }
}
const HAVE = haveSystemdAnalyze();
if (!HAVE) {
  // CI installs systemd (.ci/run): there the absence is a failure, not a skip.
  if (process.env.CI) throw new Error('systemd-analyze is required in CI (install systemd)');
  console.warn('SKIPPED systemd-analyze tests: systemd-analyze is not installed');
}

const GOOD_UNIT = '[Unit]\nDescription=app\n[Service]\nType=oneshot\nExecStart=/usr/bin/app --serve\n[Install]\nWantedBy=multi-user.target\n';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

async function stageError(p: Promise<unknown>): Promise<StagedrootError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(StagedrootError);
  return err as StagedrootError;
}

describe.skipIf(!HAVE)('systemd units checked at stage with systemd-analyze verify', () => {
  it('rejects a unit with a syntax error with systemd-analyze\'s message; the booted tree is unchanged', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n', 'usr/bin/app': { content: '#!/bin/sh\n', mode: 0o755 } } });
    const booted = t.sysroot.treePath('0001');
    const before = hashTree(booted);
    const err = await stageError(
      t.sysroot.stage({ label: 'broken-unit', files: [{ path: '/etc/systemd/system/app.service', contents: '[Unit]\nDescription=app\n[Servce]\nExecStart=/usr/bin/app\n' }] }),
    );
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.isRejection).toBe(true);
    expect(err.message).toContain("Unknown section 'Servce'");
    const unknown = err.issues.find((i) => i.message.includes("Unknown section 'Servce'"));
    expect(unknown).toMatchObject({ code: 'SYSTEMD_UNIT_INVALID', path: 'etc/systemd/system/app.service', severity: 'error' });
    expect(err.issues.some((i) => i.message.includes('has no ExecStart='))).toBe(true);

    expect(hashTree(booted)).toBe(before);
    const st = t.sysroot.status();
    expect(st.staged).toBeNull();
    expect(st.lastFailure).toMatchObject({ label: 'broken-unit', phase: 'validate', code: 'VALIDATION_FAILED' });
    expect(st.lastFailure!.issues!.map((i) => i.message).join('\n')).toContain("Unknown section 'Servce'");
  });

  it('the CLI shows the issues and exits 3', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const { writeFileSync } = await import('node:fs');
    const spec = `${t.scratch}/bad.json`;
    writeFileSync(spec, JSON.stringify({ files: [{ path: '/etc/systemd/system/x.service', contents: '[Service]\nExecStrat=/bin/true\n' }] }));
    const r = await cli(['stage', spec, '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain("Unknown key 'ExecStrat' in section [Service]");
    expect(r.err).toContain('etc/systemd/system/x.service');
    const st = await cli(['status', '--json', '--sysroot', t.dir]);
    expect(JSON.parse(st.out).lastFailure.issues.length).toBeGreaterThan(0);
  });

  it('accepts a valid unit in a bare tree (the noise a bare tree causes is dropped)', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/systemd/system/app.service', contents: GOOD_UNIT }] });
    expect(r.warnings).toEqual([]);
    expect(t.sysroot.status().staged).toBe(r.id);
  });

  it('keeps "not executable" when the tree ships the directory but not the command', async () => {
    t = await tempSysroot({ tree: { 'usr/bin/other': { content: '#!/bin/sh\n', mode: 0o755 } } });
    const err = await stageError(t.sysroot.stage({ files: [{ path: '/etc/systemd/system/app.service', contents: GOOD_UNIT }] }));
    expect(err.issues).toContainEqual(expect.objectContaining({ path: 'etc/systemd/system/app.service', message: expect.stringContaining('Command /usr/bin/app is not executable') }));
  });

  it('a socket without its service: accepted in a config-only tree, rejected in a tree that ships OS units', async () => {
    const socket = { path: '/etc/systemd/system/helper.socket', contents: '[Socket]\nListenStream=8080\n[Install]\nWantedBy=sockets.target\n' };
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    await t.sysroot.stage({ files: [socket] });
    t.cleanup();
    t = await tempSysroot({ tree: { 'usr/lib/systemd/system/other.service': GOOD_UNIT } });
    const err = await stageError(t.sysroot.stage({ files: [socket] }));
    expect(err.issues).toEqual([expect.objectContaining({ path: 'etc/systemd/system/helper.socket', message: 'systemd-analyze: helper.socket: service helper.service not loaded, socket cannot be started.' })]);
  });

  it('checks a drop-in against the unit the tree ships', async () => {
    t = await tempSysroot({ tree: { 'usr/lib/systemd/system/app.service': GOOD_UNIT } });
    const err = await stageError(t.sysroot.stage({ files: [{ path: '/etc/systemd/system/app.service.d/10-env.conf', contents: '[Service]\nEnvironmnet=A=1\n' }] }));
    expect(err.issues).toContainEqual(expect.objectContaining({ code: 'SYSTEMD_UNIT_INVALID', path: 'etc/systemd/system/app.service.d/10-env.conf', message: expect.stringContaining("Unknown key 'Environmnet'") }));
  });

  it('checks a drop-in for a unit the tree does not ship (an OS unit) against a stub', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    const err = await stageError(
      t.sysroot.stage({
        files: [
          { path: '/etc/systemd/system/kubelet.service.d/10-ok.conf', contents: '[Service]\nEnvironment=A=1\n' },
          { path: '/etc/systemd/system/kubelet.service.d/20-bad.conf', contents: 'Environment=B=2\n' },
        ],
      }),
    );
    expect(err.issues).toEqual([expect.objectContaining({ path: 'etc/systemd/system/kubelet.service.d/20-bad.conf', message: expect.stringContaining('Assignment outside of section') })]);
    // A good drop-in alone passes: nothing about the stub unit leaks out.
    const ok = await t.sysroot.stage({ files: [{ path: '/etc/systemd/system/kubelet.service.d/10-ok.conf', contents: '[Service]\nEnvironment=A=1\n' }] });
    expect(ok.warnings).toEqual([]);
  });

  it('checks only the units the update changed', async () => {
    t = await tempSysroot({ tree: { 'etc/systemd/system/old.service': '[Servce]\nbroken\n' } });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hi\n' }] });
    expect(t.sysroot.status().staged).toBe(r.id);
  });

  it('can be switched off', async () => {
    t = await tempSysroot({ tree: {} });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/systemd/system/x.service', contents: '[Servce]\n' }] }, { builtins: { systemdVerify: false } });
    expect(t.sysroot.status().staged).toBe(r.id);
  });

  it('fails with TOOL_MISSING naming systemd-analyze when it cannot be run (and is not switched off)', async () => {
    t = await tempSysroot({ tree: {} });
    const err = await stageError(t.sysroot.stage({ files: [{ path: '/etc/systemd/system/x.service', contents: GOOD_UNIT }] }, { builtins: { systemdVerify: { tool: '/nonexistent/systemd-analyze' } } }));
    expect(err.code).toBe('TOOL_MISSING');
    expect(err.message).toContain('/nonexistent/systemd-analyze');
    expect(err.isRejection).toBe(false);
    expect(t.sysroot.status().lastFailure).toMatchObject({ phase: 'validate', code: 'TOOL_MISSING' });
  });
});
