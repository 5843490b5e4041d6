/**
 * systemd's manager over its private socket (src/systemd/bus/manager.ts), against the test
 * server (test/helpers/fake-systemd-bus.ts): a job's result waited for (done; failed,
 * told as systemctl tells it), a method error, a signal before its call's reply, the
 * connection refused (BusUnavailable: nothing sent), dropped while a job runs and an
 * oversized message (the action failed, not made again).
 */
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BusUnavailable } from '../../../src/systemd/bus/connection.js';
import { SystemdManager, unitObjectPath } from '../../../src/systemd/bus/manager.js';
import { fakeSystemd, type FakeSystemd, type FakeSystemdOptions } from '../../helpers/fake-systemd-bus.js';

let sd: FakeSystemd | null = null;
let mgr: SystemdManager | null = null;
afterEach(async () => {
  mgr?.close();
  mgr = null;
  await sd?.close();
  sd = null;
});

async function open(o: FakeSystemdOptions): Promise<{ sd: FakeSystemd; m: SystemdManager }> {
  sd = await fakeSystemd(o);
  mgr = await SystemdManager.open(sd.socket, 5000);
  return { sd, m: mgr };
}

describe('SystemdManager', () => {
  it('subscribes, restarts and reloads a unit in mode replace and waits for each job; daemon-reload', async () => {
    const { sd, m } = await open({ units: { 'a.service': { jobMs: 50 } } });
    await expect(m.unitJob('restart', 'a.service', 5000)).resolves.toEqual({ ok: true, output: '', timedOut: false });
    await expect(m.unitJob('reload', 'a.service', 5000)).resolves.toMatchObject({ ok: true });
    await expect(m.daemonReload(5000)).resolves.toMatchObject({ ok: true });
    expect(sd.calls).toEqual(['Subscribe', 'RestartUnit a.service replace', 'ReloadUnit a.service replace', 'Reload']);
  });

  it("a failed job: systemctl's message, with the service's Result explained", async () => {
    const { sd, m } = await open({ units: { 'live-fail.service': { result: 'failed', serviceResult: 'exit-code' }, 'b.socket': { result: 'failed' }, 'c.service': { result: 'canceled' } } });
    expect(await m.unitJob('restart', 'live-fail.service', 5000)).toEqual({ ok: false, output: 'Job for live-fail.service failed because the control process exited with error code.', timedOut: false });
    expect(sd.calls).toContain(`Get org.freedesktop.systemd1.Service Result`);
    expect(await m.unitJob('restart', 'b.socket', 5000)).toMatchObject({ ok: false, output: 'Job for b.socket failed.' });
    expect(await m.unitJob('reload', 'c.service', 5000)).toMatchObject({ ok: false, output: 'Job for c.service canceled.' });
  });

  it('a skipped or dependency job is a failure', async () => {
    const { m } = await open({ units: { 's.service': { result: 'skipped' }, 'd.service': { result: 'dependency' } } });
    expect(await m.unitJob('restart', 's.service', 5000)).toMatchObject({ ok: false, output: 'Job for s.service was skipped.' });
    expect(await m.unitJob('restart', 'd.service', 5000)).toMatchObject({ ok: false, output: expect.stringMatching(/^A dependency job for d\.service failed/) });
  });

  it('a method error (NoSuchUnit) is the outcome, with its name', async () => {
    const { m } = await open({ units: {} });
    expect(await m.unitJob('restart', 'nope.service', 5000)).toEqual({ ok: false, output: 'Failed to restart nope.service: Unit nope.service not found. (org.freedesktop.systemd1.NoSuchUnit)', timedOut: false });
  });

  it("other signals (every unit's PropertiesChanged) before the job's JobRemoved are passed over", async () => {
    const { m } = await open({ units: { 'a.service': {} }, noise: 200 });
    await expect(m.unitJob('restart', 'a.service', 5000)).resolves.toMatchObject({ ok: true });
  });

  it("a JobRemoved that comes before its call's reply is not missed", async () => {
    const { m } = await open({ units: { 'a.service': {} }, signalFirst: true });
    await expect(m.unitJob('restart', 'a.service', 5000)).resolves.toMatchObject({ ok: true });
  });

  it('a job whose signal never comes times out', async () => {
    const { m } = await open({ units: { 'slow.service': { jobMs: 5000 } } });
    expect(await m.unitJob('restart', 'slow.service', 100)).toMatchObject({ ok: false, timedOut: true, output: expect.stringMatching(/no answer from systemd in 0\.1 s/) });
  });

  it('no socket, or the authentication refused: BusUnavailable', async () => {
    await expect(SystemdManager.open(path.join('/nonexistent', 'private'), 5000)).rejects.toBeInstanceOf(BusUnavailable);
    sd = await fakeSystemd({ refuseAuth: true });
    await expect(SystemdManager.open(sd.socket, 5000)).rejects.toThrow(/authentication refused/);
    expect(sd.calls).toEqual([]);
  });

  it('the connection dropped while the job runs: the action failed (it was sent)', async () => {
    const { sd, m } = await open({ units: { 'a.service': {} }, dropAfter: 'RestartUnit' });
    expect(await m.unitJob('restart', 'a.service', 5000)).toMatchObject({ ok: false, timedOut: false, output: expect.stringMatching(/RestartUnit a\.service: the bus connection was closed by its peer/) });
    expect(sd.calls.filter((c) => c.startsWith('RestartUnit'))).toHaveLength(1);
  });

  it('an oversized message is refused from its header: the connection dropped, the action failed', async () => {
    const { m } = await open({ units: { 'a.service': {} }, oversizedOn: { member: 'RestartUnit', bodyBytes: 64 * 1024 * 1024 } });
    expect(await m.unitJob('restart', 'a.service', 5000)).toMatchObject({ ok: false, output: expect.stringMatching(/over the limit of 4194304/) });
    expect(m.bus.closedBy).not.toBeNull();
  });

  it("a unit's object path is systemd's escaping of its name", () => {
    expect(unitObjectPath('live-fail.service')).toBe('/org/freedesktop/systemd1/unit/live_2dfail_2eservice');
    expect(unitObjectPath('1x@y.service')).toBe('/org/freedesktop/systemd1/unit/_31x_40y_2eservice');
  });
});
