/** mulberry32: a small seeded PRNG, so that a failing randomized run can be replayed from its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** A seed from the environment variable `name`, or a fresh one. */
export function seedFrom(name: string): number {
  const v = process.env[name];
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : Math.floor(Math.random() * 2 ** 31);
}
