import { afterEach, describe, expect, it } from 'vitest';
import { reboot, tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { mcdAnnotations, MCD_ANNOTATION } from '../../src/agent/mcd-annotations.js';
import { assessHealth } from '../../src/assess-health.js';

let t: TempSysroot | undefined;
afterEach(() => t?.cleanup());

const state = (desired: string) => {
  const a = mcdAnnotations(t!.sysroot.status(), desired);
  return [a[MCD_ANNOTATION.currentConfig], a[MCD_ANNOTATION.state], a[MCD_ANNOTATION.reason]];
};

describe('machine-config-daemon annotations from status', () => {
  it('follow an update through Working to Done, and a failed one to Degraded', async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' }, label: 'rendered-worker-1' });
    expect(mcdAnnotations(t.sysroot.status(), 'rendered-worker-1')).toEqual({
      'machineconfiguration.openshift.io/currentConfig': 'rendered-worker-1',
      'machineconfiguration.openshift.io/desiredConfig': 'rendered-worker-1',
      'machineconfiguration.openshift.io/state': 'Done',
      'machineconfiguration.openshift.io/reason': '',
    });
    // A new desired config: not staged yet, staged, rebooted into (under assessment), then good.
    expect(state('rendered-worker-2')).toEqual(['rendered-worker-1', 'Working', '']);
    await t.sysroot.stage({ label: 'rendered-worker-2', files: [{ path: '/etc/kubelet.conf', contents: 'a\n' }] });
    expect(state('rendered-worker-2')).toEqual(['rendered-worker-1', 'Working', '']);
    await reboot(t.sysroot);
    expect(state('rendered-worker-2')).toEqual(['rendered-worker-2', 'Working', '']);
    await t.sysroot.markGood();
    expect(state('rendered-worker-2')).toEqual(['rendered-worker-2', 'Done', '']);

    // A desired config that fails validation: Degraded with the phase and the reason; the node keeps running the old one.
    await t.sysroot.stage({ label: 'rendered-worker-3', files: [{ path: '/etc/a', contents: 'x', mode: '0666' }] }).catch(() => {});
    const [cur, st, reason] = state('rendered-worker-3');
    expect([cur, st]).toEqual(['rendered-worker-2', 'Degraded']);
    expect(reason).toMatch(/^validate of rendered-worker-3 \(deployment 0003\) failed: Validation rejected .*; error WORLD_WRITABLE at etc\/a/);
    // The failure is about another config than the one desired now: not Degraded.
    expect(state('rendered-worker-4')).toEqual(['rendered-worker-2', 'Working', '']);
    // The corrected config supersedes the failure.
    await t.sysroot.stage({ label: 'rendered-worker-3', files: [{ path: '/etc/a', contents: 'x' }] });
    expect(state('rendered-worker-3')).toEqual(['rendered-worker-2', 'Working', '']);
  });

  it('report a failed health check as Degraded, with the node back on its old config after the reboot', async () => {
    t = await tempSysroot({ tree: {}, label: 'rendered-1' });
    await t.sysroot.stage({ label: 'rendered-2', files: [{ path: '/etc/a', contents: 'x' }] });
    await reboot(t.sysroot);
    await assessHealth(t.sysroot, { required: ['false'] });
    expect(state('rendered-2')).toEqual(['rendered-2', 'Degraded', 'health of rendered-2 (deployment 0002) failed: required health check failed: false (exited 1)']);
    await t.sysroot.boot();
    expect(state('rendered-2')[0]).toBe('rendered-1');
    expect(state('rendered-2')[1]).toBe('Degraded');
    expect(state('rendered-1')).toEqual(['rendered-1', 'Done', '']);
  });

  it('bounds the reason and can name configs another way', async () => {
    t = await tempSysroot({ tree: {}, label: 'base' });
    await t.sysroot.stage({ label: 'x'.repeat(50), files: [{ path: '/etc/a', contents: 'x', mode: '0666' }] }).catch(() => {});
    const a = mcdAnnotations(t.sysroot.status(), 'cfg-0002', { configOf: (d) => `cfg-${d.id}`, maxReasonLength: 40 });
    expect(a[MCD_ANNOTATION.state]).toBe('Degraded');
    expect(a[MCD_ANNOTATION.reason]).toHaveLength(40);
    expect(a[MCD_ANNOTATION.currentConfig]).toBe('cfg-0001');
  });
});
