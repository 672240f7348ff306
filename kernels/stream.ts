// A plain memory-streaming read (the bandwidth yardstick of bench/kernels.ts): xor of every 16 bytes.

/** Reads numBytes (a multiple of 64) from p; returns a value that depends on all of them so nothing is skipped. */
export function stream_read(p: usize, numBytes: i32): i32 {
  if (ASC_FEATURE_SIMD) {
    let a = i32x4.splat(0), b = i32x4.splat(0), c = i32x4.splat(0), d = i32x4.splat(0);
    const end = p + <usize>numBytes;
    for (; p < end; p += 64) {
      a = v128.xor(a, v128.load(p));
      b = v128.xor(b, v128.load(p, 16));
      c = v128.xor(c, v128.load(p, 32));
      d = v128.xor(d, v128.load(p, 48));
    }
    const r = v128.xor(v128.xor(a, b), v128.xor(c, d));
    return i32x4.extract_lane(r, 0) ^ i32x4.extract_lane(r, 1) ^ i32x4.extract_lane(r, 2) ^ i32x4.extract_lane(r, 3);
  }
  let x: i64 = 0;
  const end = p + <usize>numBytes;
  for (; p < end; p += 8) x ^= load<i64>(p);
  return <i32>(x ^ (x >> 32));
}
