import { describe, expect, it } from 'vitest';
import { bytesOfName, displayPath, hasRawBytes, hostPath, nameFromBytes } from '../../../src/fs/core/names.js';

describe('names are bytes', () => {
  it('keeps valid UTF-8 as the plain string and escapes every invalid byte', () => {
    expect(nameFromBytes(Buffer.from('café/日本/😀', 'utf8'))).toBe('café/日本/😀');
    expect(nameFromBytes(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).toBe('caf\udce9');
    // An overlong "/" and an encoded UTF-16 surrogate are invalid UTF-8: escaped byte by byte.
    expect(nameFromBytes(Buffer.from([0xc0, 0xaf]))).toBe('\udcc0\udcaf');
    expect(nameFromBytes(Buffer.from([0xed, 0xa0, 0x80]))).toBe('\udced\udca0\udc80');
    expect(hasRawBytes('caf\udce9')).toBe(true);
    expect(hasRawBytes('café')).toBe(false);
  });

  it('round-trips random byte strings exactly', () => {
    let seed = 7;
    const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 256;
    for (let n = 0; n < 2000; n++) {
      const b = Buffer.from(Array.from({ length: 1 + (n % 17) }, () => rnd() || 1));
      const s = nameFromBytes(b);
      expect(bytesOfName(s).equals(b), b.toString('hex')).toBe(true);
      // and through JSON, as a manifest line carries it
      expect(bytesOfName(JSON.parse(JSON.stringify(s)) as string).equals(b)).toBe(true);
    }
  });

  it('makes a Buffer host path only for escaped names', () => {
    expect(hostPath('/t', 'etc/motd')).toBe('/t/etc/motd');
    const h = hostPath('/t', 'usr/caf\udce9');
    expect(Buffer.isBuffer(h)).toBe(true);
    expect((h as Buffer).equals(Buffer.from([...Buffer.from('/t/usr/caf'), 0xe9]))).toBe(true);
  });

  it('prints escaped bytes and control characters unambiguously', () => {
    expect(displayPath('usr/caf\udce9')).toBe('usr/caf\\xe9');
    expect(displayPath('a\nb\\c')).toBe('a\\x0ab\\\\c');
    expect(displayPath('café')).toBe('café');
  });
});
