/**
 * File names are bytes. Inside stagedroot a tree path is a JS string; a name that is not
 * valid UTF-8 is carried in it with the "surrogateescape" mapping Python uses for the
 * same problem: each byte of an invalid sequence becomes the lone surrogate U+DC80 +
 * (byte - 0x80). Valid UTF-8 never decodes to a lone surrogate, so the mapping round-trips
 * byte for byte; JSON.stringify writes such a character as `\udcXX`, so manifests, deltas
 * and state files carry it unchanged. Only the disk boundary (src/fs/) turns an escaped
 * path back into bytes (a Buffer path) — see hostPath.
 */

const ESCAPED = /[\udc80-\udcff]/;

/** True when a tree path holds escaped (non-UTF-8) bytes. */
export function hasRawBytes(p: string): boolean {
  return ESCAPED.test(p);
}

/** A name read as bytes, as a tree path string (surrogateescape for invalid UTF-8). */
export function nameFromBytes(b: Uint8Array): string {
  let out = '';
  let i = 0;
  let plain = 0; // start of the current run of valid text
  const flush = (end: number): void => {
    if (end > plain) out += Buffer.from(b.buffer, b.byteOffset + plain, end - plain).toString('utf8');
  };
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      i += 1;
      continue;
    }
    const n = validSequence(b, i);
    if (n > 0) {
      i += n;
      continue;
    }
    flush(i);
    out += String.fromCharCode(0xdc00 + c);
    i += 1;
    plain = i;
  }
  flush(b.length);
  return out;
}

/** Length of the valid UTF-8 sequence starting at `i` (a non-ASCII lead byte), 0 when invalid. */
function validSequence(b: Uint8Array, i: number): number {
  const c = b[i]!;
  const cont = (k: number, lo = 0x80, hi = 0xbf): boolean => i + k < b.length && b[i + k]! >= lo && b[i + k]! <= hi;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0; // no UTF-16 surrogates
  if (c >= 0xe1 && c <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/** The bytes of a tree path (escaped bytes restored). */
export function bytesOfName(p: string): Buffer {
  if (!hasRawBytes(p)) return Buffer.from(p, 'utf8');
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < p.length; i++) {
    const u = p.charCodeAt(i);
    if (u >= 0xdc80 && u <= 0xdcff && !(i > 0 && isHigh(p.charCodeAt(i - 1)))) {
      if (i > start) parts.push(Buffer.from(p.slice(start, i), 'utf8'));
      parts.push(Buffer.from([u - 0xdc00]));
      start = i + 1;
    }
  }
  if (start < p.length) parts.push(Buffer.from(p.slice(start), 'utf8'));
  return Buffer.concat(parts);
}

const isHigh = (u: number): boolean => u >= 0xd800 && u <= 0xdbff;

/**
 * The host path of `rel` under `base`: the plain string when the name is UTF-8 (the
 * usual case, and the cheap one), else a Buffer with the name's own bytes.
 */
export function hostPath(base: string, rel: string): string | Buffer {
  if (rel === '') return base;
  if (!hasRawBytes(rel)) return base + '/' + rel;
  return Buffer.concat([Buffer.from(base + '/', 'utf8'), bytesOfName(rel)]);
}

/** Joins a host directory and a child name, keeping bytes when either is a Buffer or the name is escaped. */
export function childPath(dir: string | Buffer, name: string): string | Buffer {
  if (typeof dir === 'string') return hostPath(dir, name);
  return Buffer.concat([dir, Buffer.from('/'), bytesOfName(name)]);
}

/**
 * A tree path for people: escaped bytes as `\xNN`, control characters and backslashes
 * escaped too, so a terminal shows every name unambiguously.
 */
export function displayPath(p: string): string {
  // eslint-disable-next-line no-control-regex
  if (!/[\u0000-\u001f\u007f\\]/.test(p) && !hasRawBytes(p)) return p;
  let out = '';
  for (let i = 0; i < p.length; i++) {
    const u = p.charCodeAt(i);
    if (u >= 0xdc80 && u <= 0xdcff && !(i > 0 && isHigh(p.charCodeAt(i - 1)))) out += '\\x' + (u - 0xdc00).toString(16).padStart(2, '0');
    else if (u < 0x20 || u === 0x7f) out += '\\x' + u.toString(16).padStart(2, '0');
    else if (u === 0x5c) out += '\\\\';
    else out += p[i];
  }
  return out;
}
