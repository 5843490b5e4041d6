/*
 * The D-Bus wire format (the specification's "Message Protocol"), as much of it as a client
 * of systemd's manager needs: messages written little-endian with the header fields and
 * body types s, o, g, u, y, b and v (of one of those); messages read in either byte order,
 * every type of the specification decoded (a header field or signal argument of a type
 * not used here is skipped correctly, not guessed), each read checked against the
 * message's bounds. File descriptors are never negotiated, so none are passed.
 */

export const MessageType = { call: 1, reply: 2, error: 3, signal: 4 } as const;
export type MessageTypeCode = (typeof MessageType)[keyof typeof MessageType];

/** Header flag: no reply is expected. */
export const NO_REPLY_EXPECTED = 0x1;

/** A value of a variant as written here: its signature (one of the basic types written here) and the value. */
export interface Variant {
  signature: string;
  value: unknown;
}

export interface BusMessage {
  type: MessageTypeCode;
  flags: number;
  serial: number;
  path?: string;
  interface?: string;
  member?: string;
  errorName?: string;
  replySerial?: number;
  destination?: string;
  sender?: string;
  /** The body's signature ("" for none). */
  signature: string;
  body: unknown[];
}

/** A message that breaks the protocol (or a limit): the connection that read it cannot go on. */
export class BusProtocolError extends Error {}

/** The bytes before the header fields: endianness, type, flags, version, body length, serial, fields' length. */
export const FIXED_HEADER = 16;
export const FIELD = { path: 1, interface: 2, member: 3, errorName: 4, replySerial: 5, destination: 6, sender: 7, signature: 8, unixFds: 9 } as const;
/** The header fields a message is read and written with: each one's type and BusMessage key (unixFds, never negotiated, is only refused). */
type FieldKey = 'path' | 'interface' | 'member' | 'errorName' | 'replySerial' | 'destination' | 'sender' | 'signature';
const HEADER_FIELDS: readonly (readonly [code: number, type: string, key: FieldKey])[] = (['path', 'interface', 'member', 'errorName', 'replySerial', 'destination', 'sender', 'signature'] as const).map(
  (key) => [FIELD[key], key === 'path' ? 'o' : key === 'replySerial' ? 'u' : key === 'signature' ? 'g' : 's', key] as const,
);
const FIELD_BY_CODE = new Map(HEADER_FIELDS.map((f) => [f[0], f] as const));
/** The specification's limit on nesting (32 arrays and 32 structs). */
const MAX_DEPTH = 64;

const align = (n: number, a: number): number => (n + a - 1) & ~(a - 1);

function alignmentOf(t: string): number {
  switch (t) {
    case 'y':
    case 'g':
    case 'v':
      return 1;
    case 'n':
    case 'q':
      return 2;
    case 'x':
    case 't':
    case 'd':
    case '(':
    case '{':
      return 8;
    default:
      return 4; // b i u h s o a
  }
}

/** The end (exclusive) of the single complete type starting at sig[i]. */
function typeEnd(sig: string, i: number, depth = 0): number {
  if (depth > MAX_DEPTH) throw new BusProtocolError(`signature "${sig}" nests too deep`);
  const c = sig[i];
  if (c === undefined) throw new BusProtocolError(`signature "${sig}" ends in the middle of a type`);
  if ('ybnqiuxtdhsogv'.includes(c)) return i + 1;
  if (c === 'a') return typeEnd(sig, i + 1, depth + 1);
  const close = c === '(' ? ')' : c === '{' ? '}' : null;
  if (close === null) throw new BusProtocolError(`signature "${sig}" has an unknown type code ${JSON.stringify(c)}`);
  let j = i + 1;
  let n = 0;
  while (sig[j] !== close) {
    j = typeEnd(sig, j, depth + 1);
    n++;
  }
  if (n === 0 || (c === '{' && n !== 2)) throw new BusProtocolError(`signature "${sig}" has an invalid ${c === '(' ? 'struct' : 'dict entry'}`);
  return j + 1;
}

/** The single complete types of a signature. */
export function splitSignature(sig: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < sig.length; ) {
    const end = typeEnd(sig, i);
    out.push(sig.slice(i, end));
    i = end;
  }
  return out;
}

/** Writes values at offsets counted from the message's start (or the body's, which starts 8-aligned). */
class Writer {
  private buf = Buffer.alloc(256);
  pos = 0;

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  align(a: number): void {
    const to = align(this.pos, a);
    this.room(to - this.pos);
    this.buf.fill(0, this.pos, to);
    this.pos = to;
  }

  byte(v: number): void {
    this.room(1);
    this.buf.writeUInt8(v, this.pos++);
  }

  u32(v: number): void {
    this.align(4);
    this.room(4);
    this.buf.writeUInt32LE(v >>> 0, this.pos);
    this.pos += 4;
  }

  /** s and o: length, UTF-8, NUL. */
  string(v: string): void {
    const b = Buffer.from(v, 'utf8');
    this.u32(b.length);
    this.room(b.length + 1);
    b.copy(this.buf, this.pos);
    this.buf.writeUInt8(0, this.pos + b.length);
    this.pos += b.length + 1;
  }

  signature(v: string): void {
    const b = Buffer.from(v, 'ascii');
    if (b.length > 255) throw new BusProtocolError(`signature "${v}" is too long`);
    this.byte(b.length);
    this.room(b.length + 1);
    b.copy(this.buf, this.pos);
    this.buf.writeUInt8(0, this.pos + b.length);
    this.pos += b.length + 1;
  }

  value(t: string, v: unknown): void {
    switch (t) {
      case 'y':
        return this.byte(v as number);
      case 'b':
        return this.u32(v ? 1 : 0);
      case 'u':
        return this.u32(v as number);
      case 's':
      case 'o':
        return this.string(v as string);
      case 'g':
        return this.signature(v as string);
      case 'v': {
        const x = v as Variant;
        this.signature(x.signature);
        return this.value(x.signature, x.value);
      }
      default:
        throw new BusProtocolError(`writing type "${t}" is not supported`);
    }
  }

  bytes(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}

/** A message's bytes (little-endian). */
export function encodeMessage(m: Omit<BusMessage, 'flags' | 'signature' | 'body'> & { flags?: number; signature?: string; body?: readonly unknown[] }): Buffer {
  const signature = m.signature ?? '';
  const types = splitSignature(signature);
  const values = m.body ?? [];
  if (types.length !== values.length) throw new BusProtocolError(`body of ${values.length} values for signature "${signature}"`);
  const body = new Writer();
  types.forEach((t, i) => body.value(t, values[i]));
  const fields: [number, string, unknown][] = [];
  for (const [code, type, key] of HEADER_FIELDS) {
    const v = key === 'signature' ? signature || undefined : m[key];
    if (v !== undefined) fields.push([code, type, v]);
  }
  const h = new Writer();
  h.byte('l'.charCodeAt(0));
  h.byte(m.type);
  h.byte(m.flags ?? 0);
  h.byte(1);
  h.u32(body.pos);
  h.u32(m.serial);
  h.u32(0); // the fields' length, set below
  const start = align(h.pos, 8);
  for (const [code, t, v] of fields) {
    h.align(8);
    h.byte(code);
    h.value('v', { signature: t, value: v });
  }
  const fieldsLength = h.pos - start;
  h.align(8);
  const header = h.bytes();
  header.writeUInt32LE(fieldsLength, 12);
  return Buffer.concat([header, body.bytes()]);
}

/**
 * The whole length of the message whose first FIXED_HEADER bytes are given (header,
 * padding and body), checked against the limit before any more of it is read.
 */
export function messageLength(head: Buffer, maxBytes: number): number {
  const le = endianOf(head);
  if (head[3] !== 1) throw new BusProtocolError(`protocol version ${head[3]} (only 1 is known)`);
  const bodyLength = le ? head.readUInt32LE(4) : head.readUInt32BE(4);
  const fieldsLength = le ? head.readUInt32LE(12) : head.readUInt32BE(12);
  const total = align(FIXED_HEADER + fieldsLength, 8) + bodyLength;
  if (total > maxBytes) throw new BusProtocolError(`a message of ${total} bytes is over the limit of ${maxBytes}`);
  return total;
}

function endianOf(head: Buffer): boolean {
  const e = String.fromCharCode(head[0] ?? 0);
  if (e !== 'l' && e !== 'B') throw new BusProtocolError(`endianness mark ${JSON.stringify(e)}`);
  return e === 'l';
}

/**
 * Whether a message's header has the string field `code` (s, o or g) equal to `value`,
 * read from its bytes without decoding the header: true or false, or null when the header
 * holds a field of a type this scan does not pass over (or breaks a bound), for the full
 * decoder to read or refuse. What lets a connection pass over systemd's flood of signals
 * (every unit's PropertiesChanged, on every client of its private socket) without
 * decoding each one's header: that decoding was ~0.5 s of CPU profiled in the guest's
 * apply-live, under TCG.
 */
export function headerFieldIs(buf: Buffer, code: number, value: Buffer): boolean | null {
  const le = buf[0] === 0x6c;
  const u32 = (p: number): number => (le ? buf.readUInt32LE(p) : buf.readUInt32BE(p));
  const end = FIXED_HEADER + u32(12);
  if (end > buf.length) return null;
  let pos = FIXED_HEADER;
  while (pos < end) {
    pos = align(pos, 8);
    if (pos + 4 > end || buf[pos + 1] !== 1 || buf[pos + 3] !== 0) return null;
    const field = buf[pos]!;
    const t = String.fromCharCode(buf[pos + 2]!);
    pos += 4;
    let start: number;
    let length: number;
    if (t === 's' || t === 'o') {
      pos = align(pos, 4);
      if (pos + 4 > end) return null;
      length = u32(pos);
      start = pos + 4;
    } else if (t === 'g') {
      length = buf[pos]!;
      start = pos + 1;
    } else if (t === 'u') {
      pos = align(pos, 4) + 4;
      continue;
    } else return null;
    if (start + length >= end || buf[start + length] !== 0) return null;
    if (field === code) return length === value.length && buf.compare(value, 0, value.length, start, start + length) === 0;
    pos = start + length + 1;
  }
  return false;
}

/** Reads values of any type, bounds-checked, at offsets counted from `base`. */
class Reader {
  constructor(
    private readonly buf: Buffer,
    private readonly le: boolean,
    public pos: number,
    private readonly end: number,
    private readonly base: number,
  ) {}

  private need(n: number): void {
    if (this.pos + n > this.end) throw new BusProtocolError('a value runs past the end of its message');
  }

  align(a: number): void {
    const to = this.base + align(this.pos - this.base, a);
    this.need(to - this.pos);
    this.pos = to;
  }

  private u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.pos++);
  }

  private fixed(t: string): number | bigint | boolean {
    const size = alignmentOf(t);
    this.align(size);
    this.need(size);
    const b = this.buf;
    const p = this.pos;
    this.pos += size;
    const le = this.le;
    switch (t) {
      case 'n':
        return le ? b.readInt16LE(p) : b.readInt16BE(p);
      case 'q':
        return le ? b.readUInt16LE(p) : b.readUInt16BE(p);
      case 'i':
        return le ? b.readInt32LE(p) : b.readInt32BE(p);
      case 'b': {
        const v = le ? b.readUInt32LE(p) : b.readUInt32BE(p);
        if (v > 1) throw new BusProtocolError(`a boolean of ${v}`);
        return v === 1;
      }
      case 'x':
        return le ? b.readBigInt64LE(p) : b.readBigInt64BE(p);
      case 't':
        return le ? b.readBigUInt64LE(p) : b.readBigUInt64BE(p);
      case 'd':
        return le ? b.readDoubleLE(p) : b.readDoubleBE(p);
      default:
        return le ? b.readUInt32LE(p) : b.readUInt32BE(p); // u h
    }
  }

  private text(length: number): string {
    this.need(length + 1);
    if (this.buf[this.pos + length] !== 0) throw new BusProtocolError('a string without its NUL');
    const s = this.buf.toString('utf8', this.pos, this.pos + length);
    this.pos += length + 1;
    return s;
  }

  value(t: string, depth = 0): unknown {
    if (depth > MAX_DEPTH) throw new BusProtocolError('a value nests too deep');
    const c = t[0];
    switch (c) {
      case 'y':
        return this.u8();
      case 's':
      case 'o':
        return this.text(this.fixed('u') as number);
      case 'g':
        return this.text(this.u8());
      case 'v': {
        const sig = this.text(this.u8());
        if (splitSignature(sig).length !== 1) throw new BusProtocolError(`a variant of signature "${sig}"`);
        return { signature: sig, value: this.value(sig, depth + 1) } satisfies Variant;
      }
      case 'a': {
        const length = this.fixed('u') as number;
        const item = t.slice(1);
        this.align(alignmentOf(item[0]!));
        const stop = this.pos + length;
        if (length > 0x4000000 || stop > this.end) throw new BusProtocolError('an array runs past the end of its message');
        const out: unknown[] = [];
        while (this.pos < stop) out.push(this.value(item, depth + 1));
        if (this.pos !== stop) throw new BusProtocolError("an array's items overrun its length");
        return out;
      }
      case '(':
      case '{': {
        this.align(8);
        return splitSignature(t.slice(1, -1)).map((f) => this.value(f, depth + 1));
      }
      default:
        return this.fixed(t);
    }
  }
}

/**
 * A message from its bytes (exactly one message, as messageLength measured it). Its body
 * is read only when `wantBody` says so from the header (else it is left empty): systemd
 * sends every client of its private socket every unit's PropertiesChanged, whose bodies
 * a client waiting for its job's JobRemoved has no use for (their decoding was ~300 ms of
 * CPU of an apply-live under TCG).
 */
export function decodeMessage(buf: Buffer, wantBody: (header: BusMessage) => boolean = () => true): BusMessage {
  if (buf.length < FIXED_HEADER) throw new BusProtocolError('a message shorter than its header');
  const le = endianOf(buf);
  const type = buf[1]!;
  if (type < 1 || type > 4) throw new BusProtocolError(`message type ${type}`);
  const bodyLength = le ? buf.readUInt32LE(4) : buf.readUInt32BE(4);
  const serial = le ? buf.readUInt32LE(8) : buf.readUInt32BE(8);
  if (serial === 0) throw new BusProtocolError('a message of serial 0');
  const h = new Reader(buf, le, 12, buf.length, 0);
  const fields = h.value('a(yv)') as [number, Variant][];
  const headerEnd = align(h.pos, 8);
  if (headerEnd + bodyLength !== buf.length) throw new BusProtocolError('the message length does not match its header');
  const m: BusMessage = { type: type as MessageTypeCode, flags: buf[2]!, serial, signature: '', body: [] };
  for (const [code, v] of fields) {
    if (code === FIELD.unixFds) {
      if (v.signature !== 'u') throw new BusProtocolError(`header field ${code} of type "${v.signature}" (not "u")`);
      if ((v.value as number) > 0) throw new BusProtocolError('a message with file descriptors (never negotiated)');
      continue;
    }
    const f = FIELD_BY_CODE.get(code);
    if (f === undefined) continue; // unknown fields are ignored, as the specification says
    if (v.signature !== f[1]) throw new BusProtocolError(`header field ${code} of type "${v.signature}" (not "${f[1]}")`);
    (m as unknown as Record<FieldKey, unknown>)[f[2]] = v.value;
  }
  if (!wantBody(m)) return m;
  const b = new Reader(buf, le, headerEnd, buf.length, headerEnd);
  m.body = splitSignature(m.signature).map((t) => b.value(t));
  if (b.pos !== buf.length) throw new BusProtocolError(`the body is longer than its signature "${m.signature}"`);
  return m;
}
