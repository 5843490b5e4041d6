/**
 * A stand-in for systemd's private D-Bus socket (/run/systemd/private) on a unix socket in a
 * temp dir, for the bus client's tests (src/systemd/bus/): the server side of the SASL
 * handshake (AUTH EXTERNAL with or without its initial response, NEGOTIATE_UNIX_FD
 * refused, BEGIN), then the manager's methods the client calls: Subscribe, ReloadUnit and
 * RestartUnit (a job path, then its JobRemoved signal with the unit's configured result),
 * Reload, Properties.Get of a service's Result, and Hello (busctl, a bus client, calls it).
 * Its wire format is the client's own (src/systemd/bus/wire.ts), checked against sd-bus by
 * busctl talking to this server (test/systemd/bus/wire.test.ts).
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { FIXED_HEADER, MessageType, decodeMessage, encodeMessage, messageLength, type BusMessage } from '../../src/systemd/bus/wire.js';

export interface FakeUnit {
  /** The job's result in its JobRemoved (default "done"). */
  result?: string;
  /** The service's Result property (a failed job's explanation), default "success". */
  serviceResult?: string;
  /** How long the job runs before its JobRemoved (default 5 ms). */
  jobMs?: number;
}

export interface FakeSystemdOptions {
  units?: Record<string, FakeUnit>;
  /** Refuse the authentication. */
  refuseAuth?: boolean;
  /** Hang up on a call of this member after answering it (the job never ends). */
  dropAfter?: string;
  /** Answer a call of this member with a message whose header declares this many body bytes. */
  oversizedOn?: { member: string; bodyBytes: number };
  /** Send a job's JobRemoved before its call's reply. */
  signalFirst?: boolean;
  /** Signals of other interfaces sent before each JobRemoved (systemd's PropertiesChanged of every unit). */
  noise?: number;
}

export interface FakeSystemd {
  socket: string;
  /** Every call received: "Member arg arg". */
  calls: string[];
  /** The signals busctl emitted to the server. */
  signals: BusMessage[];
  /** How many connections are open. */
  connections(): number;
  close(): Promise<void>;
}

const JOB_PATH = '/org/freedesktop/systemd1/job/';

export async function fakeSystemd(o: FakeSystemdOptions = {}): Promise<FakeSystemd> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stagedroot-bus-'));
  const socket = path.join(dir, 'private');
  const calls: string[] = [];
  const signals: BusMessage[] = [];
  let serial = 0;
  let job = 0;
  const conns = new Set<net.Socket>();
  const server = net.createServer((c) => {
    conns.add(c);
    c.on('close', () => conns.delete(c));
    c.on('error', () => {});
    let buf = Buffer.alloc(0);
    let authed = false;
    const send = (m: Omit<Parameters<typeof encodeMessage>[0], 'serial'>): void => {
      if (!c.destroyed) c.write(encodeMessage({ ...m, serial: ++serial }));
    };
    const reply = (call: BusMessage, signature = '', body: unknown[] = []): void => send({ type: MessageType.reply, replySerial: call.serial, destination: call.sender, signature, body });
    const error = (call: BusMessage, name: string, text: string): void => send({ type: MessageType.error, replySerial: call.serial, errorName: name, signature: 's', body: [text] });
    const onCall = (m: BusMessage): void => {
      calls.push([m.member, ...m.body.map((b) => (typeof b === 'object' ? JSON.stringify(b) : String(b)))].join(' '));
      const big = o.oversizedOn;
      if (big !== undefined && big.member === m.member) {
        const head = Buffer.alloc(FIXED_HEADER);
        head.write('l', 0);
        head.writeUInt8(MessageType.reply, 1);
        head.writeUInt8(1, 3);
        head.writeUInt32LE(big.bodyBytes, 4);
        head.writeUInt32LE(++serial, 8);
        head.writeUInt32LE(0, 12);
        c.write(head);
        c.write(Buffer.alloc(64 * 1024));
        return;
      }
      switch (m.member) {
        case 'Hello':
          return reply(m, 's', [':1.1']);
        case 'Subscribe':
        case 'Reload':
          return reply(m);
        case 'ReloadUnit':
        case 'RestartUnit': {
          const unit = String(m.body[0]);
          const u = o.units?.[unit];
          if (u === undefined) return error(m, 'org.freedesktop.systemd1.NoSuchUnit', `Unit ${unit} not found.`);
          const id = ++job;
          const removed = (): void => {
            for (let i = 0; i < (o.noise ?? 0); i++) send({ type: MessageType.signal, path: `/org/freedesktop/systemd1/unit/u${i}`, interface: 'org.freedesktop.DBus.Properties', member: 'PropertiesChanged', signature: 'ss', body: ['org.freedesktop.systemd1.Unit', 'x'.repeat(2000)] });
            send({ type: MessageType.signal, path: '/org/freedesktop/systemd1', interface: 'org.freedesktop.systemd1.Manager', member: 'JobRemoved', signature: 'uoss', body: [id, `${JOB_PATH}${id}`, unit, u.result ?? 'done'] });
          };
          if (o.signalFirst) removed();
          reply(m, 'o', [`${JOB_PATH}${id}`]);
          if (o.dropAfter === m.member) {
            c.destroy();
            return;
          }
          if (!o.signalFirst) setTimeout(removed, u.jobMs ?? 5);
          return;
        }
        case 'Get': {
          const unit = Object.keys(o.units ?? {}).find((n) => m.path?.endsWith(`/${n.replace(/[^A-Za-z0-9]/g, (ch) => `_${ch.charCodeAt(0).toString(16)}`)}`));
          return reply(m, 'v', [{ signature: 's', value: (unit && o.units?.[unit]?.serviceResult) ?? 'success' }]);
        }
        default:
          return error(m, 'org.freedesktop.DBus.Error.UnknownMethod', `Unknown method ${m.member}`);
      }
    };
    c.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (!authed) {
        if (buf[0] === 0) buf = buf.subarray(1);
        const eol = buf.indexOf('\r\n');
        if (eol < 0) return;
        const line = buf.subarray(0, eol).toString('latin1');
        buf = buf.subarray(eol + 2);
        if (o.refuseAuth && line.startsWith('AUTH')) c.write('REJECTED EXTERNAL\r\n');
        else if (/^AUTH EXTERNAL [0-9a-f]+$/.test(line) || line.startsWith('DATA')) c.write(`OK ${'0123456789abcdef'.repeat(2)}\r\n`);
        else if (line === 'AUTH EXTERNAL') c.write('DATA\r\n');
        else if (line === 'NEGOTIATE_UNIX_FD') c.write('ERROR\r\n');
        else if (line === 'BEGIN') authed = true;
        else c.write('ERROR\r\n');
      }
      while (buf.length >= FIXED_HEADER) {
        const n = messageLength(buf, 1 << 20);
        if (buf.length < n) return;
        const m = decodeMessage(buf.subarray(0, n));
        buf = buf.subarray(n);
        if (m.type === MessageType.call) onCall(m);
        else if (m.type === MessageType.signal) signals.push(m);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    calls,
    signals,
    connections: () => conns.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of conns) c.destroy();
        server.close(() => {
          fs.rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
