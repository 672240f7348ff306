// Quantized matmul: out[t, r] = sum_c w[r, c] * x[t, c] over repacked weights and q8 activations (quantize.ts).
//
// Repacked weight layout (built at load by src/backend/wasm/repack.ts), rows padded to a multiple of 4:
//   wq [numRows / 4, numGroups, 4 rows, groupBytes]  quants of 4 interleaved rows, group by group
//   ws [numRows / 4, numGroups, 4 rows] f32           scale per group
//   wm [numRows / 4, numGroups, 4 rows] f32           offset per group ("min"), absent for KIND_I8
// so w = ws * q + wm for every weight of a group; or, for types whose offset is a fixed multiple of the scale
// (Q4_0: -8, Q5_0: -16, Q6_K: -32), w = ws * (q - zeroPoint) with no wm at all: the zero point is applied to the
// exact integer sum (isum - zeroPoint * sum(qa)), which saves the offset array and two float ops per group. Kinds:
//   KIND_I8   signed int8, 32 per group, no offset (Q8_0)
//   KIND_U8   unsigned 0..63 in bytes, 32 per group (Q5_0, Q5_1, Q5_K)
//   KIND_U4   unsigned nibbles, 32 per group in 16 bytes: byte j = q[j] | q[j + 16] << 4 (Q4_0, Q4_1, Q4_K)
//   KIND_U8G16 unsigned 0..63 in bytes, 16 per group (Q6_K, whose scales change every 16 weights)
// Unsigned quants stay below 128, so they are valid i7 operands of the relaxed dot product.
//
// Per group and row the integer dot product is exact, then one fixed sequence of f32 ops adds it to the row's sum:
//   acc += (f32(isum [- zeroPoint * qs]) * ws) * da  [+ wm * sa]
// The same sequence runs in every build and for any number of tokens, so out[t, r] never depends on numTokens,
// on the thread split, or on the build (scalar / SIMD / relaxed give identical bits).
import { reduce4i } from "./common";

export const KIND_I8: i32 = 0;
export const KIND_U8: i32 = 1;
export const KIND_U4: i32 = 2;
export const KIND_U8G16: i32 = 3;

function groupBytes(kind: i32): i32 {
  return kind == KIND_I8 || kind == KIND_U8 ? 32 : 16;
}

function groupSize(kind: i32): i32 {
  return kind == KIND_U8G16 ? 16 : 32;
}

// ---- SIMD row-group kernels: 4 rows x 1 token, result = f32x4 of the 4 rows' sums ----

// @ts-ignore: decorator
@inline function dot16s(w: v128, al: v128, ah: v128): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(w), al), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(w), ah));
}

// @ts-ignore: decorator
@inline function dot16u(w: v128, a: v128, al: v128, ah: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i32x4.relaxed_dot_i8x16_i7x16_add_s(a, w, i32x4.splat(0));
  return i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(w), al), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(w), ah));
}

// @ts-ignore: decorator
@inline function dot32u(w0: v128, w1: v128, a0: v128, a1: v128, a0l: v128, a0h: v128, a1l: v128, a1h: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return i32x4.relaxed_dot_i8x16_i7x16_add_s(a1, w1, i32x4.relaxed_dot_i8x16_i7x16_add_s(a0, w0, i32x4.splat(0)));
  }
  return i32x4.add(
    i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(w0), a0l), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(w0), a0h)),
    i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(w1), a1l), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(w1), a1h)),
  );
}

function simdI8(q: usize, s: usize, qa: usize, da: usize, numGroups: i32): v128 {
  let acc = f32x4.splat(0);
  for (let g = 0; g < numGroups; g++) {
    const a0 = v128.load(qa);
    const a1 = v128.load(qa, 16);
    const a0l = i16x8.extend_low_i8x16_s(a0);
    const a0h = i16x8.extend_high_i8x16_s(a0);
    const a1l = i16x8.extend_low_i8x16_s(a1);
    const a1h = i16x8.extend_high_i8x16_s(a1);
    const d0 = i32x4.add(dot16s(v128.load(q), a0l, a0h), dot16s(v128.load(q, 16), a1l, a1h));
    const d1 = i32x4.add(dot16s(v128.load(q, 32), a0l, a0h), dot16s(v128.load(q, 48), a1l, a1h));
    const d2 = i32x4.add(dot16s(v128.load(q, 64), a0l, a0h), dot16s(v128.load(q, 80), a1l, a1h));
    const d3 = i32x4.add(dot16s(v128.load(q, 96), a0l, a0h), dot16s(v128.load(q, 112), a1l, a1h));
    const f = f32x4.convert_i32x4_s(reduce4i(d0, d1, d2, d3));
    acc = f32x4.add(acc, f32x4.mul(f32x4.mul(f, v128.load(s)), v128.load32_splat(da)));
    q += 128;
    s += 16;
    qa += 32;
    da += 4;
  }
  return acc;
}

// @ts-ignore: decorator
@inline function simdU8(q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, numGroups: i32, zeroPoint: i32, qs: usize): v128 {
  let acc = f32x4.splat(0);
  for (let g = 0; g < numGroups; g++) {
    const a0 = v128.load(qa);
    const a1 = v128.load(qa, 16);
    let a0l = a0, a0h = a0, a1l = a1, a1h = a1;
    if (!ASC_FEATURE_RELAXED_SIMD) {
      a0l = i16x8.extend_low_i8x16_s(a0);
      a0h = i16x8.extend_high_i8x16_s(a0);
      a1l = i16x8.extend_low_i8x16_s(a1);
      a1h = i16x8.extend_high_i8x16_s(a1);
    }
    const d0 = dot32u(v128.load(q), v128.load(q, 16), a0, a1, a0l, a0h, a1l, a1h);
    const d1 = dot32u(v128.load(q, 32), v128.load(q, 48), a0, a1, a0l, a0h, a1l, a1h);
    const d2 = dot32u(v128.load(q, 64), v128.load(q, 80), a0, a1, a0l, a0h, a1l, a1h);
    const d3 = dot32u(v128.load(q, 96), v128.load(q, 112), a0, a1, a0l, a0h, a1l, a1h);
    let isum = reduce4i(d0, d1, d2, d3);
    if (zeroPoint != 0) {
      isum = i32x4.sub(isum, i32x4.splat(zeroPoint * load<i32>(qs)));
      acc = f32x4.add(acc, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(isum), v128.load(s)), v128.load32_splat(da)));
    } else {
      const f = f32x4.convert_i32x4_s(isum);
      acc = f32x4.add(acc, f32x4.add(f32x4.mul(f32x4.mul(f, v128.load(s)), v128.load32_splat(da)), f32x4.mul(v128.load(m), v128.load32_splat(sa))));
    }
    q += 128;
    s += 16;
    m += 16;
    qa += 32;
    da += 4;
    sa += 4;
    qs += 4;
  }
  return acc;
}

// @ts-ignore: decorator
@inline function simdU4(q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, numGroups: i32, zeroPoint: i32, qs: usize): v128 {
  let acc = f32x4.splat(0);
  const lowMask = i8x16.splat(0x0f); // nibbles: (p & 15) and ((p >> 4 as i16 lanes) & 15): x86 has no 8-bit shift
  for (let g = 0; g < numGroups; g++) {
    const a0 = v128.load(qa);
    const a1 = v128.load(qa, 16);
    let a0l = a0, a0h = a0, a1l = a1, a1h = a1;
    if (!ASC_FEATURE_RELAXED_SIMD) {
      a0l = i16x8.extend_low_i8x16_s(a0);
      a0h = i16x8.extend_high_i8x16_s(a0);
      a1l = i16x8.extend_low_i8x16_s(a1);
      a1h = i16x8.extend_high_i8x16_s(a1);
    }
    const p0 = v128.load(q);
    const p1 = v128.load(q, 16);
    const p2 = v128.load(q, 32);
    const p3 = v128.load(q, 48);
    const d0 = dot32u(v128.and(p0, lowMask), v128.and(i16x8.shr_u(p0, 4), lowMask), a0, a1, a0l, a0h, a1l, a1h);
    const d1 = dot32u(v128.and(p1, lowMask), v128.and(i16x8.shr_u(p1, 4), lowMask), a0, a1, a0l, a0h, a1l, a1h);
    const d2 = dot32u(v128.and(p2, lowMask), v128.and(i16x8.shr_u(p2, 4), lowMask), a0, a1, a0l, a0h, a1l, a1h);
    const d3 = dot32u(v128.and(p3, lowMask), v128.and(i16x8.shr_u(p3, 4), lowMask), a0, a1, a0l, a0h, a1l, a1h);
    let isum = reduce4i(d0, d1, d2, d3);
    if (zeroPoint != 0) {
      isum = i32x4.sub(isum, i32x4.splat(zeroPoint * load<i32>(qs)));
      acc = f32x4.add(acc, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(isum), v128.load(s)), v128.load32_splat(da)));
    } else {
      const f = f32x4.convert_i32x4_s(isum);
      acc = f32x4.add(acc, f32x4.add(f32x4.mul(f32x4.mul(f, v128.load(s)), v128.load32_splat(da)), f32x4.mul(v128.load(m), v128.load32_splat(sa))));
    }
    q += 64;
    s += 16;
    m += 16;
    qa += 32;
    da += 4;
    sa += 4;
    qs += 4;
  }
  return acc;
}

// @ts-ignore: decorator
@inline function simdU8G16(q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, numGroups: i32, zeroPoint: i32, qs: usize): v128 {
  let acc = f32x4.splat(0);
  for (let g = 0; g < numGroups; g++) {
    const a = v128.load(qa);
    let al = a, ah = a;
    if (!ASC_FEATURE_RELAXED_SIMD) {
      al = i16x8.extend_low_i8x16_s(a);
      ah = i16x8.extend_high_i8x16_s(a);
    }
    const d0 = dot16u(v128.load(q), a, al, ah);
    const d1 = dot16u(v128.load(q, 16), a, al, ah);
    const d2 = dot16u(v128.load(q, 32), a, al, ah);
    const d3 = dot16u(v128.load(q, 48), a, al, ah);
    let isum = reduce4i(d0, d1, d2, d3);
    const daG = da + ((<usize>g >> 1) << 2);
    if (zeroPoint != 0) {
      isum = i32x4.sub(isum, i32x4.splat(zeroPoint * load<i32>(qs)));
      acc = f32x4.add(acc, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(isum), v128.load(s)), v128.load32_splat(daG)));
    } else {
      const f = f32x4.convert_i32x4_s(isum);
      acc = f32x4.add(acc, f32x4.add(f32x4.mul(f32x4.mul(f, v128.load(s)), v128.load32_splat(daG)), f32x4.mul(v128.load(m), v128.load32_splat(sa))));
    }
    q += 64;
    s += 16;
    m += 16;
    qa += 16;
    sa += 4;
    qs += 4;
  }
  return acc;
}

// ---- scalar twin: the same integer sums and the same f32 op sequence per row ----

function scalarQuant(kind: i32, q: usize, i: i32): i32 {
  // element i of one row's group at q
  if (kind == KIND_I8) return <i32>load<i8>(q + i);
  if (kind == KIND_U4) return i < 16 ? <i32>(load<u8>(q + i) & 15) : <i32>(load<u8>(q + i - 16) >> 4);
  return <i32>load<u8>(q + i);
}

function scalarRowGroup(kind: i32, q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, numGroups: i32, out4: usize, zeroPoint: i32, qs: usize): void {
  const gb = groupBytes(kind);
  const gs = groupSize(kind);
  for (let r = 0; r < 4; r++) {
    let acc: f32 = 0;
    for (let g = 0; g < numGroups; g++) {
      const qg = q + <usize>((g * 4 + r) * gb);
      const ag = qa + <usize>(g * gs);
      let isum: i32 = 0;
      for (let i = 0; i < gs; i++) isum += scalarQuant(kind, qg, i) * <i32>load<i8>(ag + i);
      const dag = load<f32>(da + (<usize>((g * gs) >> 5) << 2));
      if (zeroPoint != 0) isum -= zeroPoint * load<i32>(qs + (<usize>g << 2));
      let t: f32 = (<f32>isum * load<f32>(s + <usize>((g * 4 + r) << 2))) * dag;
      if (kind != KIND_I8 && zeroPoint == 0) t = t + load<f32>(m + <usize>((g * 4 + r) << 2)) * load<f32>(sa + (<usize>g << 2));
      acc = acc + t;
    }
    store<f32>(out4 + (<usize>r << 2), acc);
  }
}

/**
 * out [numTokens, rows] f32 for row groups [groupStart, groupEnd) (of 4 rows). Activations from quantize_q8:
 * qa [numTokens, cols] i8, da [numTokens, cols / 32]; sa / qs are sa16 / qs16 for KIND_U8G16, else sa32 / qs32.
 * zeroPoint: 0 when wm holds float offsets (or for KIND_I8), else the integer offset (wm unused).
 * tmp: 16 bytes of per-thread scratch for rows past the end.
 */
export function matmul_quant(
  kind: i32, out: usize, wq: usize, ws: usize, wm: usize,
  qa: usize, da: usize, sa: usize, rows: i32, cols: i32, numTokens: i32, zeroPoint: i32, qs: usize,
  groupStart: i32, groupEnd: i32, tmp: usize,
): void {
  const gs = groupSize(kind);
  const numGroups = cols / gs;
  const qStride = <usize>(numGroups * 4 * groupBytes(kind));
  const sStride = <usize>(numGroups * 16);
  const saPerToken = <usize>((cols / gs) << 2);
  for (let rg = groupStart; rg < groupEnd; rg++) {
    const q = wq + <usize>rg * qStride;
    const s = ws + <usize>rg * sStride;
    const m = wm + <usize>rg * sStride;
    const rowBase = rg * 4;
    const full = rowBase + 4 <= rows;
    for (let t = 0; t < numTokens; t++) {
      const qat = qa + <usize>(t * cols);
      const dat = da + <usize>((t * (cols >> 5)) << 2);
      const sat = sa + <usize>t * saPerToken;
      const qst = qs + <usize>t * saPerToken;
      const dst = out + (<usize>(t * rows + rowBase) << 2);
      const target = full ? dst : tmp;
      if (ASC_FEATURE_SIMD) {
        let acc: v128;
        // each call site below is its own inlined copy: with and without float offsets
        if (kind == KIND_I8) acc = simdI8(q, s, qat, dat, numGroups);
        else if (kind == KIND_U8) acc = zeroPoint != 0 ? simdU8(q, s, m, qat, dat, sat, numGroups, zeroPoint, qst) : simdU8(q, s, m, qat, dat, sat, numGroups, 0, qst);
        else if (kind == KIND_U4) acc = zeroPoint != 0 ? simdU4(q, s, m, qat, dat, sat, numGroups, zeroPoint, qst) : simdU4(q, s, m, qat, dat, sat, numGroups, 0, qst);
        else acc = zeroPoint != 0 ? simdU8G16(q, s, m, qat, dat, sat, numGroups, zeroPoint, qst) : simdU8G16(q, s, m, qat, dat, sat, numGroups, 0, qst);
        v128.store(target, acc);
      } else {
        scalarRowGroup(kind, q, s, m, qat, dat, sat, numGroups, target, zeroPoint, qst);
      }
      if (!full) {
        for (let r = 0; r < rows - rowBase; r++) store<f32>(dst + (<usize>r << 2), load<f32>(tmp + (<usize>r << 2)));
      }
    }
  }
}
