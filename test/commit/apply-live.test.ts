import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { isStagedrootError } from '../../src/errors.js';
import { countingHook, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { fakeSystemd } from '../helpers/fake-systemd-bus.js';

const FAKE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../helpers/fake-systemctl.sh');
let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const TREE = { 'etc/containers/policy.json': '{}\n', 'etc/hosts': '127.0.0.1 localhost\n', 'etc/motd': 'hi\n', 'usr/lib/os-release': 'ID=test\n' };
const POLICY = '{"default":[{"type":"reject"}]}\n';

/** A sysroot whose first deployment is booted, and the fake systemctl's log. */
async function booted(o: { onWarning?: (w: string) => void } = {}): Promise<{ t: TempSysroot; log: string; services: { command: string[] } }> {
  const s = await tempSysroot({ tree: TREE, ...o });
  await s.sysroot.boot({ runDir: '/nonexistent' });
  const log = path.join(s.scratch, 'systemctl.log');
  return { t: s, log, services: { command: ['sh', FAKE, log] } };
}
const calls = (log: string): string[] => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : []);
const read = (tree: string, p: string): string => fs.readFileSync(path.join(tree, p), 'utf8');

describe('apply-live', () => {
  it('writes the update into the running root, reloads CRI-O, and makes the deployment current with no reboot pending', async () => {
    const b = await booted();
    t = b.t;
    const old = t.sysroot.status().booted!;
    const oldTree = t.sysroot.status().deployments.find((d) => d.id === old)!.path;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY, mode: '0640' }] });
    expect(r.activation?.mode).toBe('live');
    const live = await t.sysroot.applyLive({ services: b.services });
    expect(live).toMatchObject({ id: r.id, running: old, paths: ['etc/containers/policy.json'] });
    expect(read(oldTree, 'etc/containers/policy.json')).toBe(POLICY);
    expect(fs.statSync(path.join(oldTree, 'etc/containers/policy.json')).mode & 0o7777).toBe(0o640);
    expect(calls(b.log)).toEqual(['reload crio.service']);
    const st = t.sysroot.status();
    expect(st).toMatchObject({ current: r.id, booted: old, staged: null, pendingReboot: false, activeLive: { deployment: r.id, runningIn: old } });
    expect(st.deployments.find((d) => d.id === r.id)?.liveApplied).toMatchObject({ from: old, actions: [{ type: 'Reload', reload: { serviceName: 'crio.service' } }], paths: 1 });
    expect(fs.existsSync(path.join(t.dir, 'live-apply'))).toBe(false);
  });

  it('the next boot runs it with the /etc edits made after the apply: after a clean shutdown and after a crash that skipped it', async () => {
    for (const cleanShutdown of [true, false]) {
      const b = await booted();
      t = b.t;
      const old = t.sysroot.status().booted!;
      const oldTree = t.sysroot.status().deployments.find((d) => d.id === old)!.path;
      const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
      await t.sysroot.applyLive({ services: b.services });
      // The admin edits the running /etc after the live apply.
      fs.writeFileSync(path.join(oldTree, 'etc/hosts'), '10.0.0.1 edited\n');
      fs.rmSync(path.join(oldTree, 'etc/motd'));
      if (cleanShutdown) expect(await t.sysroot.finalize()).toMatchObject({ finalized: false, reason: 'nothing-staged' });
      await t.sysroot.boot({ runDir: '/nonexistent' });
      const st = t.sysroot.status();
      expect(st, `clean shutdown: ${cleanShutdown}`).toMatchObject({ booted: r.id, current: r.id, activeLive: null, pendingReboot: false });
      expect(read(r.path, 'etc/containers/policy.json')).toBe(POLICY);
      expect(read(r.path, 'etc/hosts'), `clean shutdown: ${cleanShutdown}`).toBe('10.0.0.1 edited\n');
      expect(fs.existsSync(path.join(r.path, 'etc/motd'))).toBe(false);
      expect((await t.sysroot.verify(r.id)).drift, 'its manifest records the carried edits').toEqual([]);
      t.cleanup();
      t = undefined;
    }
  });

  it('local edits of paths the update does not touch, made before the apply: left in the running tree by its merge, carried into the new deployment at the next finalize or boot', async () => {
    for (const cleanShutdown of [true, false]) {
      const warnings: string[] = [];
      const b = await booted({ onWarning: (w) => warnings.push(w) });
      t = b.t;
      const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
      fs.writeFileSync(path.join(oldTree, 'etc/motd'), 'edited before the stage\n');
      const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
      // Between the stage and the apply: an edit, an addition (a new directory too), a removal, and an edit the update wins over.
      fs.writeFileSync(path.join(oldTree, 'etc/hosts'), '10.0.0.2 edited before the apply\n');
      fs.mkdirSync(path.join(oldTree, 'etc/local.d'));
      fs.writeFileSync(path.join(oldTree, 'etc/local.d/a.conf'), 'added before the apply\n');
      fs.rmSync(path.join(oldTree, 'etc/motd'));
      fs.writeFileSync(path.join(oldTree, 'etc/containers/policy.json'), '{"local":"after the stage"}\n');
      const live = await t.sysroot.applyLive({ services: b.services });
      expect(live.merge.conflicts).toEqual([{ path: 'etc/containers/policy.json', kept: `kept/${r.id}/etc/containers/policy.json` }]);
      expect(read(oldTree, 'etc/containers/policy.json')).toBe(POLICY);
      // The apply merged the update's own paths only: the other edits wait in the running tree for the carry.
      expect(read(r.path, 'etc/hosts')).toBe('127.0.0.1 localhost\n');
      expect(read(oldTree, 'etc/hosts')).toBe('10.0.0.2 edited before the apply\n');
      fs.writeFileSync(path.join(oldTree, 'etc/local.d/b.conf'), 'added after the apply\n');
      if (cleanShutdown) expect(await t.sysroot.finalize()).toMatchObject({ finalized: false, reason: 'nothing-staged' });
      const boot = await t.sysroot.boot({ runDir: '/nonexistent' });
      const where = `clean shutdown: ${cleanShutdown}`;
      expect([...warnings, ...boot.actions].filter((a) => a.startsWith('carried')), where).toEqual([`carried 5 local changes of the running /etc into live-applied deployment ${r.id}`]);
      expect(t.sysroot.status(), where).toMatchObject({ booted: r.id, current: r.id, activeLive: null });
      expect(read(r.path, 'etc/containers/policy.json'), where).toBe(POLICY);
      expect(read(r.path, 'etc/hosts'), where).toBe('10.0.0.2 edited before the apply\n');
      expect(read(r.path, 'etc/local.d/a.conf'), where).toBe('added before the apply\n');
      expect(read(r.path, 'etc/local.d/b.conf'), where).toBe('added after the apply\n');
      expect(fs.existsSync(path.join(r.path, 'etc/motd')), where).toBe(false);
      expect(fs.readFileSync(path.join(t.dir, 'kept', r.id, 'etc/containers/policy.json'), 'utf8'), where).toBe('{"local":"after the stage"}\n');
      expect((await t.sysroot.verify(r.id)).drift, `${where}: its manifest records the carried edits`).toEqual([]);
      t.cleanup();
      t = undefined;
    }
  });

  it('refuses a deployment whose decision is a reboot (exit 3, naming the path), changing nothing', async () => {
    const b = await booted();
    t = b.t;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'changed\n' }] });
    const before = t.sysroot.status();
    const err = await t.sysroot.applyLive({ services: b.services }).catch((e: unknown) => e);
    expect(isStagedrootError(err, 'LIVE_NOT_POSSIBLE')).toBe(true);
    expect((err as Error).message).toContain('/etc/motd');
    expect((err as { isRejection: boolean }).isRejection).toBe(true);
    expect(t.sysroot.status()).toEqual(before);
    expect(read(before.deployments.find((d) => d.booted)!.path, 'etc/motd')).toBe('hi\n');
    expect(calls(b.log)).toEqual([]);
    expect(t.sysroot.status().staged).toBe(r.id);
  });

  it('a failed action is undone: files back, the service reloaded again, the deployment left staged, lastFailure names the action', async () => {
    for (const discardOnFailure of [false, true]) {
      const b = await booted();
      t = b.t;
      const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
      fs.writeFileSync(`${b.log}.fail`, 'reload crio.service\n');
      const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }, { path: '/etc/containers/registries.d/new.yaml', contents: 'docker: {}\n' }] });
      expect(r.activation?.mode).toBe('live');
      const err = await t.sysroot.applyLive({ services: b.services, discardOnFailure }).catch((e: unknown) => e);
      expect(isStagedrootError(err, 'LIVE_ACTION_FAILED')).toBe(true);
      expect((err as Error).message).toContain('systemctl reload crio.service');
      expect(read(oldTree, 'etc/containers/policy.json')).toBe('{}\n');
      expect(fs.existsSync(path.join(oldTree, 'etc/containers/registries.d')), 'a directory the apply created is gone').toBe(false);
      expect(calls(b.log)).toEqual(['reload crio.service', 'reload crio.service']);
      const st = t.sysroot.status();
      expect(st.staged).toBe(discardOnFailure ? null : r.id);
      expect(st.current).toBe(st.booted);
      expect(st.lastFailure).toMatchObject({ id: r.id, phase: 'apply-live', code: 'LIVE_ACTION_FAILED', output: expect.stringContaining('control process exited') });
      expect(fs.existsSync(path.join(t.dir, 'live-apply'))).toBe(false);
      if (!discardOnFailure) {
        // The reboot path is still there: the staged deployment finalizes and boots.
        fs.rmSync(`${b.log}.fail`);
        await t.sysroot.finalize();
        await t.sysroot.boot({ runDir: '/nonexistent' });
        expect(read(r.path, 'etc/containers/policy.json')).toBe(POLICY);
      }
      t.cleanup();
      t = undefined;
    }
  });

  it("over systemd's private socket: the action's job waited for, a failed one undone over it too, lastFailure names the unit; systemctl not run", async () => {
    const b = await booted();
    t = b.t;
    const sd = await fakeSystemd({ units: { 'crio.service': { result: 'failed', serviceResult: 'exit-code' } } });
    try {
      const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
      const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
      const err = await t.sysroot.applyLive({ services: { ...b.services, bus: sd.socket } }).catch((e: unknown) => e);
      expect(isStagedrootError(err, 'LIVE_ACTION_FAILED')).toBe(true);
      expect((err as Error).message).toContain('ReloadUnit crio.service failed: Job for crio.service failed because the control process exited with error code.');
      expect(read(oldTree, 'etc/containers/policy.json')).toBe('{}\n');
      expect(sd.calls.filter((c) => c.startsWith('ReloadUnit'))).toEqual(['ReloadUnit crio.service replace', 'ReloadUnit crio.service replace']);
      expect(calls(b.log)).toEqual([]);
      expect(t.sysroot.status()).toMatchObject({ staged: r.id, lastFailure: { phase: 'apply-live', reason: expect.stringContaining('Job for crio.service failed') } });
      // The same deployment again, the job done this time.
      const ok = await fakeSystemd({ units: { 'crio.service': {} } });
      try {
        await expect(t.sysroot.applyLive({ services: { ...b.services, bus: ok.socket } })).resolves.toMatchObject({ id: r.id });
        expect(ok.calls).toEqual(['Subscribe', 'ReloadUnit crio.service replace']);
      } finally {
        await ok.close();
      }
      expect(calls(b.log)).toEqual([]);
    } finally {
      await sd.close();
    }
  });

  it('a local edit of a path the update also changes: the update wins live, the local version is kept and reported', async () => {
    const b = await booted();
    t = b.t;
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    fs.writeFileSync(path.join(oldTree, 'etc/containers/policy.json'), '{"local":true}\n');
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    const live = await t.sysroot.applyLive({ services: b.services });
    expect(read(oldTree, 'etc/containers/policy.json')).toBe(POLICY);
    expect(live.merge.conflicts).toEqual([{ path: 'etc/containers/policy.json', kept: `kept/${r.id}/etc/containers/policy.json` }]);
    expect(fs.readFileSync(path.join(t.dir, 'kept', r.id, 'etc/containers/policy.json'), 'utf8')).toBe('{"local":true}\n');
  });

  it('the CLI reports the merge it made (a kept local version at its path under the sysroot)', async () => {
    const b = await booted();
    t = b.t;
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    fs.writeFileSync(path.join(oldTree, 'etc/containers/policy.json'), '{"local":true}\n');
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    const ok = await cli(['apply-live', '--sysroot', t.dir, '--systemctl', `sh ${FAKE} ${b.log}`]);
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toContain(`applied live: deployment ${r.id} is current`);
    expect(ok.out).toContain(`last merge into ${r.id} at `);
    expect(ok.out).toContain(`etc/containers/policy.json: local version kept at ${t.dir}/kept/${r.id}/etc/containers/policy.json`);
  });

  it('writes the state twice: the intent before the swap, then the one after its last steps', async () => {
    const hook = countingHook();
    const s = await tempSysroot({ tree: TREE, faults: hook });
    t = s;
    await s.sysroot.boot({ runDir: '/nonexistent' });
    await s.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    const log = path.join(s.scratch, 'systemctl.log');
    const from = hook.ops.length;
    await s.sysroot.applyLive({ services: { command: ['sh', FAKE, log] } });
    const stateWrites = hook.ops.slice(from).filter((o) => o === `rename ${path.join(s.dir, 'state.json')}`);
    expect(stateWrites).toHaveLength(2);
    const st = s.sysroot.status();
    expect(st.current).toBe(st.activeLive?.deployment);
    expect(JSON.parse(fs.readFileSync(path.join(s.dir, 'state.json'), 'utf8'))).toMatchObject({ intent: null, finishPending: null });
  });

  it('an SSH key outside etc/ (the sshkey policy, None) is written into the running root too', async () => {
    t = await tempSysroot({ tree: { ...TREE, 'root/.ssh/authorized_keys': 'ssh-ed25519 AAAAold\n' } });
    await t.sysroot.boot({ runDir: '/nonexistent' });
    const log = path.join(t.scratch, 'systemctl.log');
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    const r = await t.sysroot.stage({ files: [{ path: '/root/.ssh/authorized_keys', contents: 'ssh-ed25519 AAAAnew\n', mode: '0600' }] });
    expect(r.activation).toMatchObject({ mode: 'live', actions: [{ type: 'None' }] });
    const live = await t.sysroot.applyLive({ services: { command: ['sh', FAKE, log] } });
    expect(live.paths).toEqual(['root/.ssh/authorized_keys']);
    expect(read(oldTree, 'root/.ssh/authorized_keys')).toBe('ssh-ed25519 AAAAnew\n');
    expect(fs.statSync(path.join(oldTree, 'root/.ssh/authorized_keys')).mode & 0o7777).toBe(0o600);
    expect(calls(log)).toEqual([]);
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status().booted).toBe(r.id);
    expect(read(r.path, 'root/.ssh/authorized_keys')).toBe('ssh-ed25519 AAAAnew\n');
  });

  it('nothing staged, or a stage after a live apply builds on the live-applied deployment and applies live again', async () => {
    const b = await booted();
    t = b.t;
    await expect(t.sysroot.applyLive({ services: b.services })).rejects.toMatchObject({ code: 'NOTHING_STAGED' });
    const first = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    await t.sysroot.applyLive({ services: b.services });
    const second = await t.sysroot.stage({ files: [{ path: '/etc/containers/registries.d/a.yaml', contents: 'docker: {}\n' }] });
    expect(t.sysroot.status().deployments.find((d) => d.id === second.id)?.parent).toBe(first.id);
    await t.sysroot.applyLive({ services: b.services });
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    expect(read(oldTree, 'etc/containers/policy.json')).toBe(POLICY);
    expect(read(oldTree, 'etc/containers/registries.d/a.yaml')).toBe('docker: {}\n');
    await t.sysroot.finalize();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status()).toMatchObject({ booted: second.id, current: second.id });
    expect(read(second.path, 'etc/containers/policy.json')).toBe(POLICY);
  });

  it('a required health check failing after the actions undoes the apply like a failed action', async () => {
    const b = await booted();
    t = b.t;
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    const check = path.join(t.scratch, 'check.sh');
    fs.writeFileSync(check, `#!/bin/sh\ngrep -q reject ${oldTree}/etc/containers/policy.json && { echo "policy rejects everything" >&2; exit 1; }\nexit 0\n`, { mode: 0o755 });
    const err = await t.sysroot.applyLive({ services: b.services, health: { required: [check] } }).catch((e: unknown) => e);
    expect(isStagedrootError(err, 'LIVE_ACTION_FAILED')).toBe(true);
    expect((err as Error).message).toContain('health check');
    expect(read(oldTree, 'etc/containers/policy.json')).toBe('{}\n');
    expect(calls(b.log)).toEqual(['reload crio.service', 'reload crio.service']);
    expect(t.sysroot.status()).toMatchObject({ staged: r.id, lastFailure: { phase: 'apply-live', output: expect.stringContaining('policy rejects everything') } });
  });
});

describe('the machine failing mid-apply', () => {
  it('a service manager that cannot run: TOOL_MISSING, the files undone at once, the deployment still staged and its merge completed by the next writer', async () => {
    const b = await booted();
    t = b.t;
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    await expect(t.sysroot.applyLive({ services: { command: ['/nonexistent/systemctl'] } })).rejects.toMatchObject({ code: 'TOOL_MISSING' });
    expect(read(oldTree, 'etc/containers/policy.json')).toBe('{}\n');
    expect(fs.existsSync(path.join(t.dir, 'live-apply'))).toBe(false);
    expect(t.sysroot.status()).toMatchObject({ staged: r.id, activeLive: null });
    await t.sysroot.finalize();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect((await t.sysroot.verify(r.id)).drift).toEqual([]);
    expect(read(r.path, 'etc/containers/policy.json')).toBe(POLICY);
  });
});

describe('a rollback after a live apply', () => {
  it('sends the next boot back to the running tree and clears the live record; a stage builds on what runs', async () => {
    const b = await booted();
    t = b.t;
    const old = t.sysroot.status().booted!;
    await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    await t.sysroot.applyLive({ services: b.services });
    await t.sysroot.rollback();
    expect(t.sysroot.status()).toMatchObject({ current: old, booted: old, activeLive: null, pendingReboot: false });
    const next = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'x\n' }] });
    expect(t.sysroot.status().deployments.find((d) => d.id === next.id)?.parent).toBe(old);
  });
});

describe('apply-live under usr/local', () => {
  it('writes a file a policy names there as a new inode: a deployment sharing the old one by a hardlink keeps it', async () => {
    const s = await tempSysroot({ tree: { ...TREE, 'usr/local/bin/load-registry-image.sh': { content: '#!/bin/sh\necho v1\n', mode: 0o755 } } });
    t = s;
    await t.sysroot.boot({ runDir: '/nonexistent' });
    const log = path.join(t.scratch, 'systemctl.log');
    const oldTree = t.sysroot.status().deployments.find((d) => d.booted)!.path;
    const r = await t.sysroot.stage({ files: [{ path: '/usr/local/bin/load-registry-image.sh', contents: '#!/bin/sh\necho v2\n', mode: '0755' }, { path: '/etc/containers/policy.json', contents: POLICY }] });
    expect(r.activation).toMatchObject({ mode: 'live', actions: [{ type: 'Reload' }, { type: 'Restart', restart: { serviceName: 'iri-registry.service' } }] });
    // A third tree sharing the running file's inode (as deployments share usr/ by hardlinks).
    const sharer = path.join(t.scratch, 'sharer');
    fs.linkSync(path.join(oldTree, 'usr/local/bin/load-registry-image.sh'), sharer);
    const ino = fs.statSync(sharer).ino;
    await t.sysroot.applyLive({ services: { command: ['sh', FAKE, log] } });
    expect(read(oldTree, 'usr/local/bin/load-registry-image.sh')).toBe('#!/bin/sh\necho v2\n');
    expect(fs.statSync(path.join(oldTree, 'usr/local/bin/load-registry-image.sh')).ino).not.toBe(ino);
    expect(fs.readFileSync(sharer, 'utf8')).toBe('#!/bin/sh\necho v1\n');
    expect(fs.statSync(sharer).ino).toBe(ino);
    expect(calls(log)).toEqual(['reload crio.service', 'restart iri-registry.service']);
  });
});

describe('apply-live --disruption-policy', () => {
  it('decides again under the given policies: a reboot decision becomes a live Restart', async () => {
    const b = await booted();
    t = b.t;
    const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'changed\n' }] });
    expect(r.activation?.mode).toBe('reboot');
    const file = path.join(t.scratch, 'policy.yaml');
    fs.writeFileSync(file, 'apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/motd\n      actions: [{type: Restart, restart: {serviceName: motd.service}}]\n');
    const live = await t.sysroot.applyLive({ services: b.services, disruptionPolicy: file });
    expect(live.actions).toEqual([{ type: 'Restart', restart: { serviceName: 'motd.service' } }]);
    expect(calls(b.log)).toEqual(['restart motd.service']);
    expect(read(t.sysroot.status().deployments.find((d) => d.booted)!.path, 'etc/motd')).toBe('changed\n');
  });
});

describe('stagedroot apply-live', () => {
  it('applies live with --json, and refuses a reboot decision with exit 3 naming the path', async () => {
    const b = await booted();
    t = b.t;
    const systemctl = `sh ${FAKE} ${b.log}`;
    await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'changed\n' }] });
    const refused = await cli(['apply-live', '--sysroot', t.dir, '--systemctl', systemctl]);
    expect(refused.code).toBe(3);
    expect(refused.err).toContain('LIVE_NOT_POSSIBLE');
    expect(refused.err).toContain('/etc/motd');
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: POLICY }] });
    const ok = await cli(['apply-live', '--sysroot', t.dir, '--systemctl', systemctl, '--json']);
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ id: r.id, paths: ['etc/containers/policy.json'], actions: [{ type: 'Reload' }] });
    const st = await cli(['status', '--sysroot', t.dir, '--json']);
    expect(JSON.parse(st.out)).toMatchObject({ current: r.id, activeLive: { deployment: r.id }, pendingReboot: false });
    const text = (await cli(['status', '--sysroot', t.dir])).out;
    expect(text).toContain(`active live: ${r.id} runs in the booted`);
    expect(text).toMatch(/applied live at .* \(1 path; Reload\), no reboot/);
    expect(text).not.toContain('pending reboot');
  });
});
