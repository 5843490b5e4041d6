import { describe, expect, it } from 'vitest';
import { compareVersions } from '../../src/util/version-compare.js';
import { prng } from '../helpers/random.js';

const sign = (n: number): number => Math.sign(n);
const icu = (a: string, b: string): number => a.localeCompare(b, 'en', { numeric: true });

describe('compareVersions: kernel versions as localeCompare(en, numeric) orders them, without Intl', () => {
  it('real kernel versions', () => {
    const versions = ['6.1.0-50-amd64', '6.1.0-50-cloud-amd64', '6.1.0-9-amd64', '6.10.0-1', '6.9.12-1', '6.2.0-1', '5.14.0-362.8.1.el9.x86-64', '5.14.0-70.13.1.el9.x86-64', '4.19.0-0.bpo.1-amd64', '6.8.0-1010-aws', '6.8.0-101-generic', '6.1.0-1', '6.1.0-1-rt-amd64', '6.1.0'];
    for (const a of versions) for (const b of versions) expect(sign(compareVersions(a, b)), `${a} vs ${b}`).toBe(sign(icu(a, b)));
    expect([...versions].sort(compareVersions)).toEqual([...versions].sort(icu));
  });

  it('generated versions (digits without leading zeros, lower-case words, dots and hyphens)', () => {
    const rand = prng(7);
    const words = ['amd64', 'cloud', 'rt', 'generic', 'aws', 'el', 'bpo', 'a', 'b', 'x'];
    const part = (): string => (rand() < 0.6 ? String(Math.floor(rand() * 120)) : words[Math.floor(rand() * words.length)]!);
    const version = (): string => {
      let s = part();
      for (let n = Math.floor(rand() * 6); n > 0; n--) s += (rand() < 0.6 ? '.' : '-') + part();
      return s;
    };
    for (let i = 0; i < 3000; i++) {
      const a = version();
      const b = rand() < 0.3 ? a.replace(/\d+$/, (d) => String(Number(d) + 1)) : version();
      expect(sign(compareVersions(a, b)), `${a} vs ${b}`).toBe(sign(icu(a, b)));
    }
  });
});
