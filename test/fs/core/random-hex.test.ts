import { describe, expect, it } from 'vitest';
import { randomHex } from '../../../src/fs/core/random-hex.js';

describe('randomHex', () => {
  it('gives n bytes as 2n hex digits, a different value each call', () => {
    for (const n of [4, 6, 8]) expect(randomHex(n)).toMatch(new RegExp(`^[0-9a-f]{${2 * n}}$`));
    const seen = new Set(Array.from({ length: 200 }, () => randomHex(8)));
    expect(seen.size).toBe(200);
  });

  it('keeps giving fresh values across the refills of its 4 KiB pool, and serves a request larger than the pool', () => {
    // 3,000 × 6 bytes is four pools and more; a value crossing a pool's end comes whole from the next.
    const seen = new Set<string>();
    for (let i = 0; i < 3000; i++) {
      const v = randomHex(i % 7 === 0 ? 13 : 6);
      expect(v).toMatch(/^(?:[0-9a-f]{12}|[0-9a-f]{26})$/);
      seen.add(v);
    }
    expect(seen.size).toBe(3000);
    expect(randomHex(5000)).toMatch(/^[0-9a-f]{10000}$/);
  });
});
