/**
 * A small seeded PRNG (xoshiro128**) so every request owns its randomness (llama2.c's `coin`): the same seed gives the
 * same samples whatever else runs in the batch.
 * @example const rng = createRng(42); const u = rng.nextFloat(); // [0, 1)
 */
export interface Rng {
  /** uniform in [0, 1), 32 bits of randomness */
  nextFloat(): number;
  /** uniform 32-bit unsigned integer */
  nextUint32(): number;
}

/** splitmix32: spreads a seed over the 128-bit state so nearby seeds give unrelated streams */
function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** Seeds may be any safe integer (OpenAI seeds are int64-ish): both 32-bit halves feed the state. */
export function createRng(seed: number): Rng {
  const lo = seed >>> 0;
  const hi = Math.floor(seed / 0x100000000) >>> 0;
  const mix = splitmix32(lo ^ Math.imul(hi, 0x27d4eb2f));
  // xoshiro128** state, never all zero
  let s0 = mix(), s1 = mix(), s2 = mix(), s3 = mix() | 1;
  const rotl = (x: number, k: number): number => ((x << k) | (x >>> (32 - k))) >>> 0;
  const nextUint32 = (): number => {
    const result = Math.imul(rotl(Math.imul(s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (s1 << 9) >>> 0;
    s2 = (s2 ^ s0) >>> 0;
    s3 = (s3 ^ s1) >>> 0;
    s1 = (s1 ^ s2) >>> 0;
    s0 = (s0 ^ s3) >>> 0;
    s2 = (s2 ^ t) >>> 0;
    s3 = rotl(s3, 11);
    return result;
  };
  return { nextUint32, nextFloat: () => nextUint32() / 0x100000000 };
}
