import { describe, expect, it } from 'vitest';
import { randomHex } from '../../../src/fs/core/random-hex.js';

describe('randomHex', () => {
  it('gives n bytes as 2n hex digits, a different value each call', () => {
    for (const n of [4, 6, 8]) expect(randomHex(n)).toMatch(new RegExp(`^[0-9a-f]{${2 * n}}$`));
    const seen = new Set(Array.from({ length: 200 }, () => randomHex(8)));
    expect(seen.size).toBe(200);
  });
});
