import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';

const FAKE = path.join(path.dirname(fileURLToPath(import.meta.url)), '../helpers/fake-systemctl.sh');
let t: TempSysroot | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

const TREE = { 'etc/hosts': '127.0.0.1 localhost\n', 'usr/lib/os-release': 'ID=test\n', 'var/lib/app/conf': 'v1\n' };
const SECRET = '{"auths":{"quay.io":{"auth":"eA=="}}}\n';

async function booted(): Promise<TempSysroot> {
  const s = await tempSysroot({ tree: TREE });
  await s.sysroot.boot({ runDir: '/nonexistent' });
  return s;
}

describe('the activation decision sees the update under the shared /var', () => {
  it('the pull secret (/var/lib/kubelet/config.json, policy None) is live, and the live apply makes it the machine’s', async () => {
    t = await booted();
    const r = await t.sysroot.stage({ files: [{ path: '/var/lib/kubelet/config.json', contents: SECRET, mode: '0600' }] });
    expect(r.activation).toMatchObject({ mode: 'live', actions: [{ type: 'None' }] });
    await t.sysroot.applyLive({ services: { command: ['sh', FAKE, path.join(t.scratch, 'systemctl.log')] } });
    expect(fs.readFileSync(path.join(t.dir, 'shared/var/lib/kubelet/config.json'), 'utf8')).toBe(SECRET);
  });

  it('a /var path no policy covers is a reboot naming it, in the stage and in its dry run; apply-live refuses it', async () => {
    t = await booted();
    const files = [{ path: '/var/lib/app/conf', contents: 'v2\n' }];
    const dry = await t.sysroot.dryRun({ files });
    expect(dry.activation).toMatchObject({ mode: 'reboot', reasons: [{ path: '/var/lib/app/conf' }] });
    const r = await t.sysroot.stage({ files });
    expect(r.activation).toMatchObject({ mode: 'reboot', reasons: [{ path: '/var/lib/app/conf' }] });
    await expect(t.sysroot.applyLive({ services: { command: ['false'] } })).rejects.toMatchObject({ code: 'LIVE_NOT_POSSIBLE' });
    expect(fs.readFileSync(path.join(t.dir, 'shared/var/lib/app/conf'), 'utf8')).toBe('v1\n');
  });

  it('a desired /var entry the machine has already is no change: the rest decides', async () => {
    t = await booted();
    const r = await t.sysroot.stage({ files: [{ path: '/var/lib/app/conf', contents: 'v1\n', mode: '0644' }] });
    expect(r.activation).toMatchObject({ mode: 'live', reasons: [] });
  });

  it('a /var file whose policy has an action is a reboot: it is written when the deployment becomes current, after the actions', async () => {
    t = await booted();
    const policy = path.join(t.scratch, 'policy.yaml');
    fs.writeFileSync(policy, 'apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /var/lib/app/conf\n      actions:\n      - type: Restart\n        restart: {serviceName: app.service}\n');
    const r = await t.sysroot.stage({ files: [{ path: '/var/lib/app/conf', contents: 'v2\n' }] }, { disruptionPolicy: policy });
    expect(r.activation).toMatchObject({ mode: 'reboot', reasons: [{ path: '/var/lib/app/conf', why: expect.stringContaining('after the live actions (Restart)') }] });
  });
});
