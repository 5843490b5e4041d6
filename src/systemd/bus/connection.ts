import * as net from 'node:net';
import { BusProtocolError, FIELD, FIXED_HEADER, MessageType, decodeMessage, encodeMessage, headerFieldIs, messageLength, type BusMessage } from './wire.js';

/*
 * A D-Bus connection on a unix socket, all of it on the event loop: the SASL handshake of
 * the specification's "Authentication Protocol" (AUTH EXTERNAL with this process's uid,
 * then BEGIN; what systemctl's sd-bus sends to systemd's private socket), then messages.
 * Peer to peer: no Hello is sent (a test that talks to a message bus calls it itself).
 * Incoming bytes are framed by each message's declared length, refused above a limit
 * before they are buffered; a protocol error or the peer's hang-up closes the connection
 * and fails every call still waiting for its reply.
 */

/** The largest message read (systemd's signals and replies to a client are a few kB; the specification's own limit is 128 MiB). */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
const MAX_AUTH_LINE = 1024;

/** The connection could not be made or authenticated: nothing was sent but the handshake. */
export class BusUnavailable extends Error {}

/** The connection ended (the peer hung up, or a protocol error) before the reply came. */
export class BusClosed extends Error {}

/** The reply to a call was an error. */
export class BusMethodError extends Error {
  constructor(
    readonly errorName: string,
    readonly detail: string,
  ) {
    super(detail === '' ? errorName : `${detail} (${errorName})`);
  }
}

/** Which signals a handler gets. */
export interface SignalMatch {
  interface: string;
  member: string;
}

const matches = (s: SignalMatch, m: BusMessage): boolean => m.interface === s.interface && m.member === s.member;

export interface CallSpec {
  destination?: string;
  path: string;
  interface: string;
  member: string;
  signature?: string;
  body?: readonly unknown[];
}

export interface OpenOptions {
  /** For the connection and the handshake. */
  timeoutMs: number;
  maxMessageBytes?: number;
}

export class BusConnection {
  private serial = 0;
  private readonly pending = new Map<number, { resolve: (m: BusMessage) => void; reject: (e: Error) => void }>();
  private readonly signalHandlers: { match: SignalMatch; member: Buffer; interface: Buffer; f: (m: BusMessage) => void }[] = [];
  private readonly closeHandlers: ((e: Error) => void)[] = [];
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private wanted = 0;
  /** Why the connection ended (null while it is open). */
  closedBy: Error | null = null;

  private constructor(
    private readonly socket: net.Socket,
    private readonly maxBytes: number,
  ) {
    // An open connection does not keep the process alive: a call waiting for its reply does (its timer).
    socket.unref();
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) => this.end(new BusClosed(`the bus connection failed: ${(e as NodeJS.ErrnoException).code ?? e.message}`)));
    socket.on('close', () => this.end(new BusClosed('the bus connection was closed by its peer')));
  }

  /** Connects to the socket at `path` and authenticates; BusUnavailable when either fails. */
  static open(path: string, o: OpenOptions): Promise<BusConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path });
      let line = '';
      const fail = (why: string): void => {
        clearTimeout(timer);
        socket.destroy();
        reject(new BusUnavailable(`cannot talk to ${path}: ${why}`));
      };
      const timer = setTimeout(() => fail(`no answer in ${o.timeoutMs} ms`), o.timeoutMs);
      const onError = (e: NodeJS.ErrnoException): void => fail(e.code ?? e.message);
      const onClose = (): void => fail('closed during the handshake');
      const onData = (d: Buffer): void => {
        const text = line + d.toString('latin1');
        const eol = text.indexOf('\r\n');
        if (eol < 0) {
          line = text;
          if (line.length > MAX_AUTH_LINE) fail('an over-long handshake line');
          return;
        }
        const answer = text.slice(0, eol);
        if (!/^OK [0-9a-f]{32}$/.test(answer)) return fail(`authentication refused (${JSON.stringify(answer.slice(0, 200))})`);
        clearTimeout(timer);
        socket.off('error', onError).off('close', onClose).off('data', onData);
        socket.write('BEGIN\r\n');
        const c = new BusConnection(socket, o.maxMessageBytes ?? MAX_MESSAGE_BYTES);
        const rest = Buffer.from(text.slice(eol + 2), 'latin1');
        if (rest.length > 0) c.onData(rest);
        resolve(c);
      };
      socket.on('error', onError).on('close', onClose).on('data', onData);
      socket.on('connect', () => {
        const uid = Buffer.from(String(process.getuid?.() ?? 0), 'ascii').toString('hex');
        socket.write(`\0AUTH EXTERNAL ${uid}\r\n`);
      });
    });
  }

  /** Sends a method call; its reply (a method return), or BusMethodError, or BusClosed. */
  call(c: CallSpec): Promise<BusMessage> {
    if (this.closedBy) return Promise.reject(this.closedBy);
    const serial = this.nextSerial();
    const bytes = encodeMessage({ type: MessageType.call, serial, ...c });
    return new Promise((resolve, reject) => {
      this.pending.set(serial, { resolve, reject });
      this.socket.write(bytes);
    });
  }

  /** Sends a signal (a test's server emits with it). */
  emit(m: Omit<BusMessage, 'type' | 'serial' | 'flags'>): void {
    this.socket.write(encodeMessage({ ...m, type: MessageType.signal, serial: this.nextSerial() }));
  }

  /** Calls `f` with each signal of that interface and member (only theirs are decoded). */
  onSignal(match: SignalMatch, f: (m: BusMessage) => void): void {
    this.signalHandlers.push({ match, member: Buffer.from(match.member), interface: Buffer.from(match.interface), f });
  }

  onClose(f: (e: Error) => void): void {
    if (this.closedBy) f(this.closedBy);
    else this.closeHandlers.push(f);
  }

  close(): void {
    this.end(new BusClosed('the bus connection was closed'));
  }

  private nextSerial(): number {
    this.serial = this.serial >= 0xffffffff ? 1 : this.serial + 1;
    return this.serial;
  }

  private end(e: Error): void {
    if (this.closedBy) return;
    this.closedBy = e;
    this.socket.destroy();
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    for (const f of this.closeHandlers.splice(0)) f(e);
  }

  private onData(d: Buffer): void {
    if (this.closedBy) return;
    this.buffered.push(d);
    this.bufferedBytes += d.length;
    try {
      for (;;) {
        if (this.wanted === 0) {
          if (this.bufferedBytes < FIXED_HEADER) return;
          this.wanted = messageLength(this.take(FIXED_HEADER, false), this.maxBytes);
        }
        if (this.bufferedBytes < this.wanted) return;
        const bytes = this.take(this.wanted, true);
        this.wanted = 0;
        // A signal no handler takes is passed over from its bytes (systemd sends many), unless its header needs the full reader.
        if (bytes[1] === MessageType.signal && this.signalHandlers.every((s) => headerFieldIs(bytes, FIELD.member, s.member) === false || headerFieldIs(bytes, FIELD.interface, s.interface) === false)) continue;
        this.dispatch(decodeMessage(bytes, (h) => h.type !== MessageType.signal || this.signalHandlers.some((s) => matches(s.match, h))));
        if (this.closedBy) return;
      }
    } catch (e) {
      if (!(e instanceof BusProtocolError)) throw e;
      this.end(new BusClosed(`the bus connection was dropped: ${e.message}`));
    }
  }

  /** The first n buffered bytes (removed from the buffer when `consume`). */
  private take(n: number, consume: boolean): Buffer {
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
    this.buffered = [all];
    if (!consume) return all.subarray(0, n);
    const rest = all.subarray(n);
    this.buffered = rest.length > 0 ? [rest] : [];
    this.bufferedBytes -= n;
    return all.subarray(0, n);
  }

  private dispatch(m: BusMessage): void {
    if (m.type === MessageType.reply || m.type === MessageType.error) {
      const p = m.replySerial === undefined ? undefined : this.pending.get(m.replySerial);
      if (p === undefined) return;
      this.pending.delete(m.replySerial!);
      if (m.type === MessageType.reply) p.resolve(m);
      else p.reject(new BusMethodError(m.errorName ?? 'an unnamed error', typeof m.body[0] === 'string' ? m.body[0] : ''));
    } else if (m.type === MessageType.signal) {
      for (const s of this.signalHandlers) if (matches(s.match, m)) s.f(m);
    }
    // A method call to this client (a peer's Peer.Ping or a test server's): not served.
  }
}
