/**
 * A small seeded PRNG (mulberry32): the same seed gives the same trees and the same
 * update on every machine, so two benchmark runs measure the same work.
 */
export function prng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    /** An integer in [lo, hi]. */
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    /** A size from a log-uniform distribution in [lo, hi] (many small, few big). */
    logSize: (lo, hi) => Math.round(Math.exp(Math.log(lo) + next() * (Math.log(hi) - Math.log(lo)))),
    /** Fisher-Yates sample of k distinct items. */
    sample(arr, k) {
      const copy = arr.slice();
      for (let i = 0; i < k && i < copy.length; i++) {
        const j = i + Math.floor(next() * (copy.length - i));
        [copy[i], copy[j]] = [copy[j], copy[i]];
      }
      return copy.slice(0, k);
    },
  };
}

/** A buffer of pseudo-random bytes from the PRNG (file contents are slices of it). */
export function randomPool(rng, size) {
  const buf = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i += 4) buf.writeUInt32LE(Math.floor(rng.next() * 4294967296), i);
  return buf;
}
