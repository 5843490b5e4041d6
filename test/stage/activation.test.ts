import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

let t: TempSysroot | undefined;
let dir: string | undefined;
afterEach(() => {
  t?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
  t = dir = undefined;
});

const stagedActivation = (t: TempSysroot) => t.sysroot.status().deployments.find((d) => d.staged)?.activation;

describe('the activation decision of a stage', () => {
  it('a CRI-O policy file is live with a reload; status shows it on the staged deployment only', async () => {
    t = await tempSysroot({ tree: { 'etc/containers/policy.json': '{}\n', 'etc/hosts': '127.0.0.1 localhost\n' } });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: '{"default":[]}\n' }] });
    const want = { mode: 'live', drain: false, actions: [{ type: 'Reload', reload: { serviceName: 'crio.service' } }], reasons: [] };
    expect(r.activation).toEqual(want);
    expect(stagedActivation(t)).toEqual(want);
    await t.sysroot.finalize();
    await t.sysroot.boot({ runDir: '/nonexistent' });
    expect(t.sysroot.status().deployments.some((d) => d.activation !== undefined)).toBe(false);
  });

  it('a new file in a new directory is decided by the file: its parent directory comes with it', async () => {
    t = await tempSysroot({ tree: { 'etc/hosts': '127.0.0.1 localhost\n' } });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/containers/policy.json', contents: '{}\n' }] });
    expect(r.activation).toEqual({ mode: 'live', drain: false, actions: [{ type: 'Reload', reload: { serviceName: 'crio.service' } }], reasons: [] });
    // A directory alone is a path of its own: no policy covers /etc/newdir.
    const d = await t.sysroot.stage({ directories: [{ path: '/etc/newdir' }] });
    expect(d.activation).toMatchObject({ mode: 'reboot', reasons: [{ path: '/etc/newdir' }] });
  });

  it('a path no policy covers is a reboot naming it; a path written again unchanged does not count', async () => {
    t = await tempSysroot({ tree: { 'etc/containers/policy.json': '{}\n', 'etc/motd': 'hi\n' } });
    const r = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hello\n' }, { path: '/etc/containers/policy.json', contents: '{}\n' }] });
    expect(r.activation).toEqual({ mode: 'reboot', drain: true, actions: [{ type: 'Reboot' }], reasons: [{ path: '/etc/motd', why: 'no disruption policy covers it' }] });
    const same = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'hi\n' }] });
    expect(same.activation).toEqual({ mode: 'live', drain: false, actions: [{ type: 'None' }], reasons: [] });
  });

  it('after a history of stages (a base with an overlay), the paths counted are exactly those whose entry changed, under usr/ (linked from the base manifest) and outside it', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n', 'etc/issue': 'x\n', 'usr/share/a/f1': '1\n', 'usr/share/a/f2': '2\n', 'usr/share/a/f3': '3\n', 'usr/share/b/g1': 'g\n', 'usr/share/b/g2': 'g\n', 'usr/lib/old': 'o\n' } });
    // Two cycles, so that the base of the last stage has an overlay of its own over the manifest it links.
    for (const contents of ['one\n', 'two\n']) {
      await t.sysroot.stage({ files: [{ path: '/usr/share/a/f1', contents }, { path: '/usr/share/b/new', contents }] });
      await t.sysroot.finalize();
      await t.sysroot.boot({ runDir: '/nonexistent' });
    }
    const r = await t.sysroot.stage({
      files: [
        { path: '/usr/share/a/f1', contents: 'two\n' }, // as it is
        { path: '/usr/share/a/f2', contents: '2\n', mode: '0600' }, // mode only
        { path: '/usr/share/a/f3', contents: 'changed\n' },
        { path: '/usr/share/b/new', contents: 'two\n' }, // as it is (a path of the base's overlay)
        { path: '/usr/share/c/fresh', contents: 'new\n' },
        { path: '/etc/motd', contents: 'hi\n' }, // as it is
        { path: '/etc/issue', contents: 'y\n' },
      ],
      remove: ['/usr/lib/old', { path: '/usr/share/none', missingOk: true }],
    });
    const reasons = (r.activation?.reasons ?? []).map((x) => ('path' in x ? x.path : null));
    expect(reasons.sort()).toEqual(['/etc/issue', '/usr/lib/old', '/usr/share/a/f2', '/usr/share/a/f3', '/usr/share/c/fresh'].sort());
  });

  it('kernel arguments force a reboot; an SSH key alone is live', async () => {
    t = await tempSysroot({ tree: { 'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n', 'etc/group': 'root:x:0:\n', 'root/.keep': '' } });
    const k = await t.sysroot.stage({ kernelArguments: { shouldExist: ['nosmt'] } });
    expect(k.activation).toMatchObject({ mode: 'reboot', reasons: [{ field: 'kernelArguments' }] });
    const s = await t.sysroot.stage({ ignition: { version: '3.4.0' }, passwd: { users: [{ name: 'root', sshAuthorizedKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake root@x'] }] } });
    expect(s.activation).toEqual({ mode: 'live', drain: false, actions: [{ type: 'None' }], reasons: [] });
  });

  it('a user policy (--disruption-policy, or the booted /etc/stagedroot/disruption-policy.yaml) is merged over the defaults', async () => {
    const policy = 'apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/motd\n      actions: [{type: Restart, restart: {serviceName: motd.service}}]\n';
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n', 'etc/stagedroot/disruption-policy.yaml': policy } });
    const viaTree = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'a\n' }] });
    expect(viaTree.activation).toMatchObject({ mode: 'live', actions: [{ type: 'Restart', restart: { serviceName: 'motd.service' } }] });
    dir = mkdtempSync(join(tmpdir(), 'policy-'));
    writeFileSync(join(dir, 'p.json'), JSON.stringify({ apiVersion: 'operator.openshift.io/v1', kind: 'MachineConfiguration', spec: { nodeDisruptionPolicy: { files: [{ path: '/etc/motd', actions: [{ type: 'Reboot' }] }] } } }));
    const viaFile = await t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'b\n' }] }, { disruptionPolicy: join(dir, 'p.json') });
    expect(viaFile.activation).toMatchObject({ mode: 'reboot', reasons: [{ path: '/etc/motd', why: 'its policy (/etc/motd) says Reboot' }] });
  });

  it('a bad policy file is a usage error naming it, and nothing is recorded', async () => {
    t = await tempSysroot({ tree: { 'etc/motd': 'hi\n' } });
    await expect(t.sysroot.stage({ files: [{ path: '/etc/motd', contents: 'a\n' }] }, { disruptionPolicy: '/nonexistent/p.yaml' })).rejects.toMatchObject({ code: 'USAGE', message: expect.stringContaining('/nonexistent/p.yaml') });
    expect(t.sysroot.status().lastFailure).toBeNull();
    expect(t.sysroot.status().staged).toBeNull();
  });
});

describe('the activation decision of a dry run', () => {
  it('is the one the stage then records, for a live and for a reboot update', async () => {
    t = await tempSysroot({ tree: { 'etc/containers/policy.json': '{}\n', 'etc/motd': 'hi\n' } });
    for (const files of [[{ path: '/etc/containers/policy.json', contents: '{"default":[]}\n' }], [{ path: '/etc/motd', contents: 'hello\n' }]]) {
      const dry = await t.sysroot.dryRun({ files });
      const staged = await t.sysroot.stage({ files });
      expect(dry.activation).toEqual(staged.activation);
      await t.sysroot.discardStaged();
    }
    expect((await t.sysroot.dryRun({ files: [{ path: '/etc/motd', contents: 'x\n' }] })).activation).toMatchObject({ mode: 'reboot', reasons: [{ path: '/etc/motd' }] });
  });

  it('a config over an image-based deployment keeps the image: live when its files allow it', async () => {
    dir = mkdtempSync(join(tmpdir(), 'image-'));
    const { umociImage } = await import('../sources/oci/oci-helpers.js');
    await umociImage(dir, join(dir, 'layout'), '1', [{ add: { 'etc/containers/policy.json': '{}\n', 'usr/lib/os-release': 'ID=test\n' } }]);
    const { pathSource } = await import('../../src/sources/detect.js');
    t = await tempSysroot({ source: pathSource(join(dir, 'layout'), { ref: '1' }) });
    expect(t.sysroot.status().deployments[0]!.origin?.digest).toMatch(/^sha256:/);
    const files = [{ path: '/etc/containers/policy.json', contents: '{"default":[]}\n' }];
    const want = { mode: 'live', drain: false, actions: [{ type: 'Reload', reload: { serviceName: 'crio.service' } }], reasons: [] };
    expect((await t.sysroot.dryRun({ files })).activation).toEqual(want);
    expect((await t.sysroot.stage({ files })).activation).toEqual(want);
  });
});
