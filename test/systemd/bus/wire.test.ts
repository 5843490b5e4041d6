/**
 * The D-Bus wire format (src/systemd/bus/wire.ts) and connection (connection.ts) against
 * reference implementations on both sides: busctl (sd-bus, what systemctl is built on)
 * calls the test server, which reads its calls and signals with wire.ts and answers with
 * it (busctl decodes the answers); the client talks to a dbus-daemon (libdbus): the
 * handshake, a call, an error reply, a signal.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusConnection, BusMethodError, BusUnavailable } from '../../../src/systemd/bus/connection.js';
import { BusProtocolError, FIELD, MessageType, decodeMessage, encodeMessage, headerFieldIs, messageLength, type BusMessage } from '../../../src/systemd/bus/wire.js';
import { fakeSystemd, type FakeSystemd } from '../../helpers/fake-systemd-bus.js';

const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

describe('the wire format', () => {
  it('writes and reads back a call, a signal with every type used, and an error', () => {
    const call = encodeMessage({ type: MessageType.call, serial: 7, destination: 'org.freedesktop.systemd1', path: '/org/freedesktop/systemd1', interface: 'org.freedesktop.systemd1.Manager', member: 'RestartUnit', signature: 'ss', body: ['x.service', 'replace'] });
    expect(messageLength(call, 1 << 20)).toBe(call.length);
    expect(decodeMessage(call)).toMatchObject({ type: 1, serial: 7, member: 'RestartUnit', signature: 'ss', body: ['x.service', 'replace'] });
    const sig = encodeMessage({ type: MessageType.signal, serial: 8, path: '/a', interface: 'a.b', member: 'C', signature: 'uosgybv', body: [42, '/j/1', 'é', 'a(yv)', 3, true, { signature: 'u', value: 9 }] });
    expect(decodeMessage(sig).body).toEqual([42, '/j/1', 'é', 'a(yv)', 3, true, { signature: 'u', value: 9 }]);
    const err = decodeMessage(encodeMessage({ type: MessageType.error, serial: 9, replySerial: 7, errorName: 'org.freedesktop.systemd1.NoSuchUnit', signature: 's', body: ['Unit x.service not found.'] }));
    expect(err).toMatchObject({ type: 3, replySerial: 7, errorName: 'org.freedesktop.systemd1.NoSuchUnit', body: ['Unit x.service not found.'] });
  });

  it('reads the body only when asked to from the header', () => {
    const sig = encodeMessage({ type: MessageType.signal, serial: 3, path: '/u', interface: 'org.freedesktop.DBus.Properties', member: 'PropertiesChanged', signature: 'ss', body: ['a', 'b'] });
    expect(decodeMessage(sig, (h) => h.member === 'JobRemoved')).toMatchObject({ member: 'PropertiesChanged', signature: 'ss', body: [] });
    expect(decodeMessage(sig, (h) => h.member === 'PropertiesChanged').body).toEqual(['a', 'b']);
  });

  it("tells a header field's value from the bytes (true, false; null where the full reader must look)", () => {
    const sig = encodeMessage({ type: MessageType.signal, serial: 3, path: '/org/freedesktop/systemd1', interface: 'org.freedesktop.systemd1.Manager', member: 'JobRemoved', signature: 'uoss', body: [1, '/j/1', 'a.service', 'done'] });
    expect(headerFieldIs(sig, FIELD.member, Buffer.from('JobRemoved'))).toBe(true);
    expect(headerFieldIs(sig, FIELD.member, Buffer.from('JobNew'))).toBe(false);
    expect(headerFieldIs(sig, FIELD.interface, Buffer.from('org.freedesktop.systemd1.Manager'))).toBe(true);
    expect(headerFieldIs(sig, FIELD.errorName, Buffer.from('x'))).toBe(false);
    const cut = Buffer.from(sig);
    cut.writeUInt32LE(4000, 12); // fields longer than the message
    expect(headerFieldIs(cut, FIELD.member, Buffer.from('JobRemoved'))).toBeNull();
  });

  it('refuses a message over the limit from its fixed header, and a truncated one', () => {
    const m = encodeMessage({ type: MessageType.signal, serial: 1, path: '/a', interface: 'a.b', member: 'C', signature: 's', body: ['x'.repeat(1000)] });
    expect(() => messageLength(m, 512)).toThrow(BusProtocolError);
    expect(() => messageLength(m, 512)).toThrow(/over the limit of 512/);
    const cut = Buffer.from(m);
    cut.writeUInt32LE(2000, 4); // a body longer than the bytes there
    expect(() => decodeMessage(cut)).toThrow(BusProtocolError);
  });
});

describe.skipIf(!has('busctl'))('busctl (sd-bus) against the test server', () => {
  let sd: FakeSystemd;
  beforeAll(async () => {
    sd = await fakeSystemd({ units: { 'a.service': {} } });
  });
  afterAll(() => sd.close());
  const busctl = (...args: string[]): Promise<{ code: number | null; out: string; err: string }> =>
    new Promise((resolve) => {
      const p = spawn('busctl', [`--address=unix:path=${sd.socket}`, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('close', (code) => resolve({ code, out, err }));
    });

  it("reads busctl's call and busctl reads the reply (an object path)", async () => {
    const r = await busctl('call', 'org.freedesktop.systemd1', '/org/freedesktop/systemd1', 'org.freedesktop.systemd1.Manager', 'RestartUnit', 'ss', 'a.service', 'replace');
    expect(r.err).toBe('');
    expect(r.out.trim()).toBe('o "/org/freedesktop/systemd1/job/1"');
    expect(sd.calls).toContain('RestartUnit a.service replace');
  });

  it('busctl reads an error reply (name and message)', async () => {
    const r = await busctl('call', 'org.freedesktop.systemd1', '/org/freedesktop/systemd1', 'org.freedesktop.systemd1.Manager', 'RestartUnit', 'ss', 'nope.service', 'replace');
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/Unit nope\.service not found\./);
  });

  it('busctl reads a variant reply', async () => {
    const r = await busctl('call', 'org.freedesktop.systemd1', '/org/freedesktop/systemd1/unit/a_2eservice', 'org.freedesktop.DBus.Properties', 'Get', 'ss', 'org.freedesktop.systemd1.Service', 'Result');
    expect(r.out.trim()).toBe('v s "success"');
  });

  it("reads busctl's JobRemoved signal (uoss)", async () => {
    const r = await busctl('emit', '/org/freedesktop/systemd1', 'org.freedesktop.systemd1.Manager', 'JobRemoved', 'uoss', '7', '/org/freedesktop/systemd1/job/7', 'b.service', 'failed');
    expect(r.code, r.err).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(sd.signals.map((s) => ({ member: s.member, signature: s.signature, body: s.body }))).toContainEqual({ member: 'JobRemoved', signature: 'uoss', body: [7, '/org/freedesktop/systemd1/job/7', 'b.service', 'failed'] });
  });
});

describe.skipIf(!has('dbus-daemon'))('the client against dbus-daemon (libdbus)', () => {
  let dir: string;
  let daemon: ReturnType<typeof spawn>;
  let address: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-dbus-'));
    const socket = path.join(dir, 'bus');
    const conf = path.join(dir, 'bus.conf');
    fs.writeFileSync(conf, `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=${socket}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>`);
    daemon = spawn('dbus-daemon', ['--config-file', conf, '--nofork', '--print-address'], { stdio: ['ignore', 'pipe', 'ignore'] });
    address = await new Promise<string>((resolve) => daemon.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
    expect(address).toContain(socket);
  });
  afterAll(() => {
    daemon.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const socketOf = (): string => path.join(dir, 'bus');
  const DBUS = { destination: 'org.freedesktop.DBus', path: '/org/freedesktop/DBus', interface: 'org.freedesktop.DBus' };

  it('authenticates, calls Hello and a method with an argument, reads a signal and an error reply', async () => {
    const c = await BusConnection.open(socketOf(), { timeoutMs: 5000 });
    const signals: BusMessage[] = [];
    c.onSignal({ interface: 'org.freedesktop.DBus', member: 'NameAcquired' }, (m) => signals.push(m));
    const others: BusMessage[] = [];
    c.onSignal({ interface: 'org.freedesktop.DBus', member: 'NameLost' }, (m) => others.push(m));
    try {
      const hello = await c.call({ ...DBUS, member: 'Hello' });
      const name = hello.body[0] as string;
      expect(name).toMatch(/^:1\.\d+$/);
      expect((await c.call({ ...DBUS, member: 'GetNameOwner', signature: 's', body: [name] })).body).toEqual([name]);
      const err = await c.call({ ...DBUS, member: 'GetNameOwner', signature: 's', body: ['no.such.name'] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BusMethodError);
      expect(err).toMatchObject({ errorName: 'org.freedesktop.DBus.Error.NameHasNoOwner' });
      expect((err as Error).message).toMatch(/no\.such\.name/);
      // The daemon's NameAcquired signal after Hello (signature s).
      expect(signals.find((s) => s.member === 'NameAcquired')?.body).toEqual([name]);
      expect(others).toEqual([]);
    } finally {
      c.close();
    }
  });

  it('a socket that is not there: BusUnavailable', async () => {
    await expect(BusConnection.open(path.join(dir, 'absent'), { timeoutMs: 5000 })).rejects.toBeInstanceOf(BusUnavailable);
  });
});
