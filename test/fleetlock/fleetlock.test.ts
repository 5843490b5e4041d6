import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { configureFleetLock, rebootWithSlot } from '../../src/agent/fleet-reboot.js';
import { FleetLockClient, FleetLockError } from '../../src/fleetlock/client.js';
import { FLEETLOCK_FILE, readFleetLockConfig, type FleetLockConfig } from '../../src/fleetlock/config.js';
import { acquireLock } from '../../src/fs/lock/writer-lock.js';
import { Sysroot } from '../../src/sysroot.js';
import { tempSysroot, type TempSysroot } from '../../src/testing/index.js';
import { cli } from '../helpers/cli.js';
import { LockServer } from './lock-server.js';

const node = (id: string, url: string, group = 'workers'): FleetLockConfig => ({ url, group, id });
const failure = (p: Promise<unknown>): Promise<FleetLockError> =>
  p.then(
    () => {
      throw new Error('expected a FleetLockError');
    },
    (e: unknown) => {
      expect(e).toBeInstanceOf(FleetLockError);
      return e as FleetLockError;
    },
  );

describe('the FleetLock client against a server with the protocol\'s semantics', () => {
  let server: LockServer;
  beforeAll(async () => {
    server = await new LockServer(1).start();
  });
  afterAll(() => server.stop());
  afterEach(() => {
    server.mode = 'ok';
    server.hungUp = 0;
    server.holders.clear();
  });

  it('sends the header and body; the lock is a counting semaphore with owners, recursive, released if held', async () => {
    const a = new FleetLockClient(node('node-a', server.url));
    const b = new FleetLockClient(node('node-b', server.url));
    await a.preReboot();
    expect(server.requests.at(-1)).toEqual({ path: '/fleetlock/v1/pre-reboot', header: 'true', body: JSON.stringify({ client_params: { id: 'node-a', group: 'workers' } }) });
    await a.preReboot(); // recursive: the owner keeps its one slot
    const full = await failure(b.preReboot());
    expect([full.kind, full.statusCode, full.code]).toEqual(['failed_lock_semaphore_full', 409, 'FLEETLOCK_FAILED']);
    expect(full.message).toContain('semaphore currently full');
    await b.steadyState(); // not held: still a success
    expect([...server.holders.get('workers')!]).toEqual(['node-a']);
    await a.steadyState();
    await b.preReboot();
    expect([...server.holders.get('workers')!]).toEqual(['node-b']);
    // Groups are separate semaphores.
    await new FleetLockClient(node('node-c', server.url, 'infra')).preReboot();
  });

  it('reports a refusing server with its error kind, and one without JSON as generic_http_<code>', async () => {
    server.mode = 'refusing';
    const e = await failure(new FleetLockClient(node('n', server.url)).preReboot());
    expect([e.kind, e.description, e.statusCode]).toEqual(['failed_lock_unavailable', 'etcd is unreachable', 500]);
    server.mode = 'html-error';
    const g = await failure(new FleetLockClient(node('n', server.url)).steadyState());
    expect([g.kind, g.statusCode]).toEqual(['generic_http_502', 502]);
  });

  it('gives up on a server that never answers after its timeout (client_failed_request), hanging up', async () => {
    // The server never answers: the call can only settle by the client's own timeout.
    server.mode = 'silent';
    const e = await failure(new FleetLockClient(node('n', server.url), { timeoutMs: 200 }).preReboot());
    expect([e.kind, e.statusCode]).toEqual(['client_failed_request', null]);
    expect(e.description).toContain('no answer within 200 ms');
    expect((e.cause as Error).name).toBe('TimeoutError');
    // The client aborted the request: the server sees the connection close unanswered.
    await vi.waitFor(() => expect(server.hungUp).toBe(1));
  });

  it('reports a server that is down (connection refused) as client_failed_request', async () => {
    const down = await new LockServer().start();
    const url = down.url;
    await down.stop();
    const e = await failure(new FleetLockClient(node('n', url)).preReboot());
    expect(e.kind).toBe('client_failed_request');
    expect(e.description).toContain('ECONNREFUSED');
  });
});

describe('rebootWithSlot and `stagedroot reboot`', () => {
  let server: LockServer;
  let t: TempSysroot;
  beforeAll(async () => {
    server = await new LockServer(1).start();
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
  });
  afterAll(async () => {
    await server.stop();
    t?.cleanup();
  });

  it('does nothing when nothing is staged (no slot taken)', async () => {
    let rebooted = 0;
    const before = server.requests.length;
    const r = await rebootWithSlot(t.sysroot.status(), { fleetLock: node('a', server.url), reboot: async () => void rebooted++ });
    expect(r).toEqual({ action: 'nothing-staged' });
    expect([rebooted, server.requests.length]).toEqual([0, before]);
  });

  it('takes the slot, then reboots; without a slot the deployment stays staged and the outcome says why', async () => {
    await t.sysroot.stage({ label: 'u1', files: [{ path: '/etc/u1', contents: '1' }] });
    const staged = t.sysroot.status().staged!;
    let rebooted = 0;
    await new FleetLockClient(node('other', server.url)).preReboot(); // another node holds the only slot
    const refused: number[] = [];
    const r = await rebootWithSlot(t.sysroot.status(), { fleetLock: node('a', server.url), reboot: async () => void rebooted++, onRefused: (_e, n) => refused.push(n) });
    expect(r.action).toBe('no-slot');
    expect(r.action === 'no-slot' && [r.waiting, r.error.kind, r.attempts]).toEqual([staged, 'failed_lock_semaphore_full', 1]);
    expect([rebooted, t.sysroot.status().staged]).toEqual([0, staged]);

    // Waiting: a bounded loop (fake clock); the other node releases during the wait.
    let clock = 0;
    let asks = 0;
    const w = await rebootWithSlot(t.sysroot.status(), {
      fleetLock: node('a', server.url),
      reboot: async () => void rebooted++,
      waitMs: 30_000,
      retryMs: 10_000,
      now: () => clock,
      sleep: async (ms) => {
        clock += ms;
        if (++asks === 2) await new FleetLockClient(node('other', server.url)).steadyState();
      },
    });
    expect(w).toEqual({ action: 'rebooted', slot: true, attempts: 3 });
    expect([...server.holders.get('workers')!]).toEqual(['a']);

    // A clock that stands still cannot make it loop for ever: 1 + waitMs / retryMs asks at most.
    const count = server.requests.length;
    const stuck = await rebootWithSlot(t.sysroot.status(), { fleetLock: node('b', server.url), reboot: async () => void rebooted++, waitMs: 50_000, retryMs: 10_000, now: () => 0, sleep: async () => {} });
    expect(stuck.action === 'no-slot' && stuck.attempts).toBe(6);
    expect(server.requests.length - count).toBe(6);
    expect(rebooted).toBe(1);
  });

  it('the CLI: configured once; `reboot` takes the slot and runs the reboot command; `health` releases it', async () => {
    server.holders.clear();
    const marker = path.join(t.scratch, 'rebooted');
    expect((await cli(['fleetlock', 'configure', '--url', 'ftp://x', '--group', 'workers', '--id', 'node-a', '--sysroot', t.dir])).code).toBe(2);
    const c = await cli(['fleetlock', 'configure', '--url', server.url, '--group', 'workers', '--id', 'node-a', '--sysroot', t.dir]);
    expect(c.code, c.err).toBe(0);
    await new FleetLockClient(node('other', server.url)).preReboot();
    const refused = await cli(['reboot', '--command', `touch ${marker}`, '--sysroot', t.dir]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/failed_lock_semaphore_full.*stays staged|stays staged.*failed_lock_semaphore_full/s);
    expect(fs.existsSync(marker)).toBe(false);
    expect(t.sysroot.status().staged).not.toBeNull();

    await new FleetLockClient(node('other', server.url)).steadyState();
    const ok = await cli(['reboot', '--command', `touch ${marker}`, '--sysroot', t.dir]);
    expect(ok.code, ok.err).toBe(0);
    expect(fs.existsSync(marker)).toBe(true);
    expect([...server.holders.get('workers')!]).toEqual(['node-a']);

    await t.sysroot.finalize();
    await t.sysroot.boot();
    const h = await cli(['health', '--json', '--sysroot', t.dir]);
    expect(h.code, h.err).toBe(0);
    expect(JSON.parse(h.out).fleetLock).toEqual({ released: true });
    expect([...server.holders.get('workers')!]).toEqual([]);
  });

  it('health says so when the slot cannot be released (server down), and still marks good', async () => {
    const u = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
    try {
      const down = await new LockServer().start();
      const url = down.url;
      await down.stop();
      expect((await cli(['fleetlock', 'configure', '--url', url, '--group', 'workers', '--id', 'n', '--timeout', '2', '--sysroot', u.dir])).code).toBe(0);
      const h = await cli(['health', '--json', '--sysroot', u.dir]);
      expect(h.code).toBe(0);
      expect(JSON.parse(h.out).fleetLock).toMatchObject({ released: false, error: { kind: 'client_failed_request' } });
    } finally {
      u.cleanup();
    }
  });
});

describe('`fleetlock configure` is a writer', () => {
  let t: TempSysroot;
  beforeAll(async () => {
    t = await tempSysroot({ tree: { 'etc/os-release': 'ID=test\n' } });
  });
  afterAll(() => t?.cleanup());

  it('BUSY (exit 4) while another writer holds the lock, writing nothing; once it is free, the file as before', async () => {
    const file = path.join(t.dir, FLEETLOCK_FILE);
    const args = ['fleetlock', 'configure', '--url', 'https://fleetlock.example/base', '--group', 'workers', '--id', 'node-a', '--sysroot', t.dir];
    const held = await acquireLock(t.dir, { operation: 'stage' });
    try {
      const busy = await cli([...args, '--json']);
      expect(busy.code).toBe(4);
      expect(JSON.parse(busy.out).error).toMatchObject({ code: 'BUSY', message: expect.stringContaining('"stage"') });
      await expect(configureFleetLock(t.dir, node('node-a', 'https://fleetlock.example/base'))).rejects.toMatchObject({ code: 'BUSY' });
      expect(fs.existsSync(file)).toBe(false);
      // --wait: it waits for the writer, then writes.
      const waiting = cli([...args, '--wait', '30']);
      await new Promise((r) => setTimeout(r, 200));
      expect(fs.existsSync(file)).toBe(false);
      held.release();
      const c = await waiting;
      expect(c.code, c.err).toBe(0);
      expect(c.out).toBe('FleetLock: https://fleetlock.example/base, group workers, id node-a\n');
    } finally {
      held.release();
    }
    expect(readFleetLockConfig(t.dir)).toEqual({ url: 'https://fleetlock.example/base', group: 'workers', id: 'node-a' });
    expect(fs.readdirSync(t.dir)).not.toContain('lock');
  });

  it('writes the file under the lock, held as "fleetlock"; a bad setting is refused before the lock is taken', async () => {
    const owners: string[] = [];
    const faults = {
      afterMutation(op: string, p: string) {
        if (p.endsWith(FLEETLOCK_FILE)) owners.push(`${op}: ${(JSON.parse(fs.readFileSync(path.join(t.dir, 'lock', 'owner.json'), 'utf8')) as { operation: string }).operation}`);
      },
    };
    const s = await Sysroot.open(t.dir, { faults });
    const c = await s.configureFleetLock({ url: 'http://127.0.0.1:1/', group: 'default', id: 'n', timeoutMs: 2000 });
    expect(c).toEqual({ url: 'http://127.0.0.1:1/', group: 'default', id: 'n', timeoutMs: 2000 });
    expect(owners.length).toBeGreaterThan(0);
    expect(owners.every((o) => o.endsWith(': fleetlock'))).toBe(true);
    expect(readFleetLockConfig(t.dir)).toEqual(c);

    const held = await acquireLock(t.dir, { operation: 'stage' });
    try {
      // USAGE, not BUSY: the settings are checked first.
      await expect(s.configureFleetLock({ url: 'ftp://x', group: 'default', id: 'n' })).rejects.toMatchObject({ code: 'USAGE', option: 'url' });
    } finally {
      held.release();
    }
    expect(readFleetLockConfig(t.dir)).toEqual(c);
  });
});
