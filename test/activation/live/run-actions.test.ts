/**
 * The live apply's action runner (src/activation/live/run-actions.ts): with a bus socket
 * each step goes to systemd over it (the test server, test/helpers/fake-systemd-bus.ts);
 * where no connection can be made (no socket, authentication refused) the steps are
 * spawned as systemctl; a step whose call was sent is never run again, not even by
 * systemctl, when its connection drops; the next step connects again.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActionRunner } from '../../../src/activation/live/run-actions.js';
import { fakeSystemd, type FakeSystemd } from '../../helpers/fake-systemd-bus.js';

const FAKE = fileURLToPath(new URL('../../helpers/fake-systemctl.sh', import.meta.url));
let dir: string;
let sd: FakeSystemd | null = null;
let runner: ActionRunner | null = null;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-runner-'));
});
afterEach(async () => {
  runner?.close();
  runner = null;
  await sd?.close();
  sd = null;
  fs.rmSync(dir, { recursive: true, force: true });
});
const spawned = (): string[] => (fs.existsSync(path.join(dir, 'log')) ? fs.readFileSync(path.join(dir, 'log'), 'utf8').trim().split('\n') : []);
const manager = (bus?: string): ConstructorParameters<typeof ActionRunner>[0] => ({ command: ['sh', FAKE, path.join(dir, 'log')], ...(bus ? { bus } : {}), timeoutMs: 5000 });

describe('ActionRunner', () => {
  it('runs every step over the bus when it answers (one connection), systemctl never', async () => {
    sd = await fakeSystemd({ units: { 'a.service': {}, 'fail.service': { result: 'failed', serviceResult: 'exit-code' } } });
    runner = new ActionRunner(manager(sd.socket));
    expect(await runner.run(['daemon-reload'])).toMatchObject({ ok: true, display: 'Reload' });
    expect(await runner.run(['reload', 'a.service'])).toMatchObject({ ok: true, display: 'ReloadUnit a.service' });
    expect(await runner.run(['restart', 'fail.service'])).toEqual({ ok: false, display: 'RestartUnit fail.service', exitCode: null, notRunnable: null, output: 'Job for fail.service failed because the control process exited with error code.' });
    expect(sd.calls.filter((c) => c !== 'Get org.freedesktop.systemd1.Service Result')).toEqual(['Subscribe', 'Reload', 'ReloadUnit a.service replace', 'RestartUnit fail.service replace']);
    expect(spawned()).toEqual([]);
  });

  it('prepare() connects ahead of the first step, which uses that connection; a close while it connects closes it', async () => {
    sd = await fakeSystemd({ units: { 'a.service': {} } });
    runner = new ActionRunner(manager(sd.socket));
    runner.prepare();
    runner.prepare();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(sd.calls).toEqual(['Subscribe']);
    expect(await runner.run(['restart', 'a.service'])).toMatchObject({ ok: true, display: 'RestartUnit a.service' });
    expect(sd.calls).toEqual(['Subscribe', 'RestartUnit a.service replace']);
    const other = new ActionRunner(manager(sd.socket));
    other.prepare();
    other.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(sd.connections()).toBe(1);
  });

  it('no socket, or the authentication refused: systemctl, for that step and the rest', async () => {
    runner = new ActionRunner(manager(path.join(dir, 'absent')));
    expect(await runner.run(['restart', 'a.service'])).toMatchObject({ ok: true, display: 'systemctl restart a.service' });
    runner.close();
    sd = await fakeSystemd({ refuseAuth: true, units: { 'a.service': {} } });
    runner = new ActionRunner(manager(sd.socket));
    expect(await runner.run(['reload', 'a.service'])).toMatchObject({ ok: true, display: 'systemctl reload a.service' });
    expect(await runner.run(['daemon-reload'])).toMatchObject({ ok: true, display: 'systemctl daemon-reload' });
    expect(spawned()).toEqual(['restart a.service', 'reload a.service', 'daemon-reload']);
    expect(sd.calls).toEqual([]);
  });

  it('a manager without a socket (a test\'s command) spawns it', async () => {
    runner = new ActionRunner(manager());
    expect(await runner.run(['reload', 'x.service'])).toMatchObject({ ok: true, display: 'systemctl reload x.service' });
    expect(spawned()).toEqual(['reload x.service']);
  });

  it('the connection dropped while its job runs: that step failed and is not run again; the next step connects again', async () => {
    sd = await fakeSystemd({ units: { 'a.service': {}, 'b.service': {} }, dropAfter: 'RestartUnit' });
    runner = new ActionRunner(manager(sd.socket));
    expect(await runner.run(['restart', 'a.service'])).toMatchObject({ ok: false, output: expect.stringMatching(/closed by its peer/) });
    expect(spawned()).toEqual([]);
    expect(await runner.run(['reload', 'b.service'])).toMatchObject({ ok: true, display: 'ReloadUnit b.service' });
    expect(sd.calls).toEqual(['Subscribe', 'RestartUnit a.service replace', 'Subscribe', 'ReloadUnit b.service replace']);
    expect(spawned()).toEqual([]);
  });
});
