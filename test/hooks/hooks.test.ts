import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isStagedrootError } from '../../src/errors.js';
import { runHooks } from '../../src/hooks/run-hooks.js';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';

let t: TempSysroot | null = null;
afterEach(() => {
  t?.cleanup();
  t = null;
});

const BASE = { 'etc/os-release': 'ID=test\n' };
const spec = (label: string) => ({ version: 1, label, files: [{ path: '/etc/app.conf', contents: `${label}\n` }] });

function hook(s: TempSysroot, phase: string, name: string, body: string, mode = 0o755): void {
  const dir = path.join(s.dir, 'hooks', phase);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`, { mode });
}

/** A hook that appends its name and environment to a log. */
function logger(s: TempSysroot, phase: string, name: string, exit = 0): void {
  const log = path.join(s.scratch, 'hooks.log');
  hook(s, phase, name, `echo "$STAGEDROOT_PHASE ${name} id=$STAGEDROOT_ID label=$STAGEDROOT_LABEL tree=$STAGEDROOT_TREE booted=$STAGEDROOT_BOOTED_TREE reason=$STAGEDROOT_REASON" >> ${log}\necho "output of ${name}"\nexit ${exit}`);
}
const log = (s: TempSysroot) => (fs.existsSync(path.join(s.scratch, 'hooks.log')) ? fs.readFileSync(path.join(s.scratch, 'hooks.log'), 'utf8').trim().split('\n') : []);

describe('phase hooks', () => {
  it('run in name order with the deployment in the environment; dot files and non-executables are skipped', async () => {
    t = await tempSysroot({ tree: BASE });
    for (const n of ['20-b', '10-a', '2-c']) logger(t, 'pre-stage', n);
    hook(t, 'pre-stage', '.hidden', 'exit 1');
    hook(t, 'pre-stage', '50-not-executable', 'exit 1', 0o644);
    logger(t, 'post-stage', 'after');
    const r = await t.sysroot.stage(spec('web-2'), { label: 'web-2' });
    const lines = log(t);
    expect(lines.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['pre-stage 10-a', 'pre-stage 2-c', 'pre-stage 20-b', 'post-stage after']);
    expect(lines[0]).toContain(`id=${r.id} label=web-2`);
    expect(lines[0]).toContain(`booted=${t.sysroot.treePath('0001')}`);
    expect(lines[3]).toContain(`tree=${r.path}`);
    expect(r.hooks!.map((h) => `${h.phase}/${h.hook} ${h.outcome}`)).toEqual(['pre-stage/10-a exited 0', 'pre-stage/2-c exited 0', 'pre-stage/20-b exited 0', 'post-stage/after exited 0']);
    expect(r.hooks![0]!.output).toBe('output of 10-a\n');
    const kept = JSON.parse(fs.readFileSync(path.join(t.dir, 'hook-runs', 'post-stage.json'), 'utf8'));
    expect(kept.runs[0].output).toBe('output of after\n');
    // One runner for every phase: pre-stage's runs are kept as the others' are.
    const pre = JSON.parse(fs.readFileSync(path.join(t.dir, 'hook-runs', 'pre-stage.json'), 'utf8'));
    expect(pre).toMatchObject({ phase: 'pre-stage', id: r.id, label: 'web-2' });
    expect(pre.runs.map((h: { hook: string }) => h.hook)).toEqual(['10-a', '2-c', '20-b']);
  });

  it('a failing pre-stage hook rejects the update (exit 3) with its output as the reason; on-failure hooks run', async () => {
    t = await tempSysroot({ tree: BASE });
    hook(t, 'pre-stage', '10-policy', 'echo "maintenance window closed" >&2\nexit 4');
    logger(t, 'pre-stage', '20-never');
    logger(t, 'on-failure', 'notify');
    const file = path.join(t.scratch, 'u.json');
    fs.writeFileSync(file, JSON.stringify(spec('blocked')));
    const r = await cli(['stage', file, '--label', 'blocked', '--sysroot', t.dir]);
    expect(r.code).toBe(3);
    expect(r.err).toContain('maintenance window closed');
    const st = t.sysroot.status();
    expect(st.staged).toBeNull();
    expect(st.lastFailure).toMatchObject({ code: 'HOOK_REJECTED', output: 'maintenance window closed\n' });
    const lines = log(t);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^on-failure notify id=\d+ label=blocked .*reason=The update was stopped by the hook pre-stage\/10-policy exited 4/);
  });

  it('on-failure hooks run when, and only when, the stage recorded a failure: once per recorded failure, never for a bad option', async () => {
    t = await tempSysroot({ tree: BASE });
    logger(t, 'on-failure', 'notify');
    // A bad option is refused before the run: nothing recorded, no hook.
    const bad = await t.sysroot.stage(spec('x'), { hookTimeoutMs: -1 }).catch((e: unknown) => e);
    expect(isStagedrootError(bad) && bad.code).toBe('USAGE');
    expect(t.sysroot.status().lastFailure).toBeNull();
    expect(log(t)).toEqual([]);
    // Two rejected updates in a row: each recorded failure runs the hook once, about itself.
    hook(t, 'pre-stage', '10-policy', 'exit 4');
    const ids: string[] = [];
    for (const label of ['first', 'second']) {
      await expect(t.sysroot.stage(spec(label), { label })).rejects.toMatchObject({ code: 'HOOK_REJECTED' });
      ids.push(t.sysroot.status().lastFailure!.id);
    }
    expect(ids[0]).not.toBe(ids[1]);
    expect(log(t).map((l) => l.split(' ').slice(0, 4).join(' '))).toEqual([`on-failure notify id=${ids[0]} label=first`, `on-failure notify id=${ids[1]} label=second`]);
  });

  it('a failing post-stage hook is reported, the stage stands', async () => {
    t = await tempSysroot({ tree: BASE });
    hook(t, 'post-stage', 'fails', 'echo broken; exit 1');
    const file = path.join(t.scratch, 'u.json');
    fs.writeFileSync(file, JSON.stringify(spec('ok')));
    const r = await cli(['stage', file, '--sysroot', t.dir]);
    expect(r.code).toBe(0);
    expect(r.err).toContain('hook post-stage/fails exited 1: broken');
    expect(t.sysroot.status().staged).not.toBeNull();
  });

  it('pre-finalize can stop finalize (exit 1, still staged); post-finalize, post-boot and on-rollback run', async () => {
    t = await tempSysroot({ tree: BASE });
    const staged = await t.sysroot.stage(spec('v2'));
    hook(t, 'pre-finalize', 'gate', 'test -e "$STAGEDROOT_TREE/etc/allow" || { echo "not allowed"; exit 1; }');
    logger(t, 'post-finalize', 'pf');
    logger(t, 'post-boot', 'pb');
    logger(t, 'on-rollback', 'rb');
    const r = await cli(['finalize', '--sysroot', t.dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('not allowed');
    expect(t.sysroot.status().staged).toBe(staged.id);
    fs.rmSync(path.join(t.dir, 'hooks', 'pre-finalize'), { recursive: true });
    await reboot(t.sysroot);
    await t.sysroot.markGood();
    await t.sysroot.rollback();
    const lines = log(t);
    expect(lines[0]).toMatch(new RegExp(`^post-finalize pf id=${staged.id} label=v2 tree=${staged.path}`));
    expect(lines[1]).toMatch(new RegExp(`^post-boot pb id=${staged.id} label=v2`));
    expect(lines[2]).toMatch(/^on-rollback rb id=0001 .*reason=manual rollback/);
    await expect(t.sysroot.finalize()).resolves.toMatchObject({ finalized: false });
  });

  it('a hook that hangs is stopped at its timeout; output is bounded', async () => {
    t = await tempSysroot({ tree: BASE });
    hook(t, 'post-boot', 'hang', 'sleep 30');
    hook(t, 'post-boot', 'loud', 'head -c 200000 /dev/zero | tr "\\0" x; echo');
    const runs = await runHooks(path.join(t.dir, 'hooks'), 'post-boot', { sysroot: t.dir }, { timeoutMs: 500 });
    expect(runs[0]!.outcome).toBe('timed out after 0.5s');
    expect(runs[0]!.ok).toBe(false);
    expect(runs[1]!.ok).toBe(true);
    expect(runs[1]!.output.length).toBeLessThan(20_000);
    const err = await t.sysroot.stage(spec('x'), { hookTimeoutMs: 0 }).catch((e: unknown) => e);
    expect(isStagedrootError(err, 'USAGE')).toBe(true);
  });
});
