import { describe, expect, it } from 'vitest';
import { comparePaths } from '../../../src/fs/core/paths.js';

/** The definition: component by component, a shorter component (or a parent) first. */
function byComponents(a: string, b: string): number {
  if (a === b) return 0;
  const pa = a.split('/');
  const pb = b.split('/');
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    if (pa[i] !== pb[i]) return pa[i]! < pb[i]! ? -1 : 1;
  }
  return pa.length - pb.length;
}

describe('comparePaths', () => {
  it('orders a parent before its children and "/" before any other character', () => {
    const sorted = ['a', 'a/b', 'a/b/c', 'a-b', 'a.b', 'ab', 'b'].sort(comparePaths);
    expect(sorted).toEqual(['a', 'a/b', 'a/b/c', 'a-b', 'a.b', 'ab', 'b']);
  });

  it('agrees with a component-by-component comparison on random paths', () => {
    const alphabet = ['a', 'b', '-', '.', ' ', '/', '/', 'é', '\u{1F600}', '0', 'Z', '_'];
    let seed = 7;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const path = () => Array.from({ length: 1 + rnd(8) }, () => alphabet[rnd(alphabet.length)]).join('');
    for (let i = 0; i < 50_000; i++) {
      const a = path();
      const b = rnd(4) === 0 ? a + path() : path();
      if (Math.sign(comparePaths(a, b)) !== Math.sign(byComponents(a, b))) throw new Error(`${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    }
  });
});
