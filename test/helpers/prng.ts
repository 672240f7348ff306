/**
 * The tests' one seeded generator (mulberry32): the same seed gives the same data on every machine, so a failure
 * reproduces. Floats in [0, 1); `randomInt` draws an integer in [0, n).
 * @example const random = rng(7); const i = randomInt(random, 10);
 */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [0, n) from `random`. */
export function randomInt(random: () => number, n: number): number {
  return Math.floor(random() * n);
}
