// The scalar twin of the SIMD tiles: the same exact integer sums and the same f32 op sequence per row (the scalar
// build runs it; the SIMD builds give identical bits).
import { KIND_I8, KIND_U6G16, groupBytes, groupSize, offsetAt, quantAt, scaleAt, superblockBytes, superblockShift } from "./block-layouts";
import { actBytes, hasOffsets } from "./matmul-chunks";

/** sum(qa) of a group from its pair sums at ps (quantize_q8), negated: ps16 holds Q6_K's 32 times them. */
// @ts-ignore: decorator
@inline export function zeroTerm(kind: i32, ps: usize, zeroPoint: i32): i32 {
  const pairs = <i32>load<i16>(ps) + <i32>load<i16>(ps, 2);
  return kind == KIND_U6G16 ? pairs : zeroPoint * pairs;
}

export function scalarTile1(kind: i32, q: usize, s: usize, m: usize, qa: usize, da: usize, sa: usize, ps: usize, numGroups: i32, out4: usize, zeroPoint: i32): void {
  const gs = groupSize(kind);
  const gb = groupBytes(kind) << 2;
  for (let r = 0; r < 4; r++) {
    let acc: f32 = 0;
    for (let g = 0; g < numGroups; g++) {
      const qg = q + <usize>(g * gb);
      const ag = qa + <usize>(g * gs * actBytes(kind));
      let isum: i32 = 0;
      for (let i = 0; i < gs; i++) {
        const a = kind == KIND_I8 ? <i32>load<i16>(ag + (<usize>i << 1)) : <i32>load<i8>(ag + i);
        isum += quantAt(kind, qg, r, i) * a;
      }
      const dag = load<f32>(da + (<usize>((g * gs) >> 5) << 2));
      if (kind != KIND_I8 && zeroPoint != 0) isum += zeroTerm(kind, ps + (<usize>g << 4), zeroPoint);
      let t: f32 = (<f32>isum * scaleAt(kind, s, g, r)) * dag;
      if (hasOffsets(kind, zeroPoint)) t = t + offsetAt(kind, s, m, g, r) * load<f32>(sa + (<usize>g << 2));
      acc = acc + t;
    }
    store<f32>(out4 + (<usize>r << 2), acc);
  }
}

/**
 * The K-quant kinds' scalar twin (kTile1 / u6Tile1 / kTile4): per row and superblock the same exact i32 sums and the
 * same f32 ops (kTerm / u6Term). da: the token's q8_K d per 32 (repeated), bs: its bsums per 32, ps: its ps16.
 */
export function scalarTileK(kind: i32, q: usize, s: usize, qa: usize, da: usize, bs: usize, ps: usize, numGroups: i32, out4: usize): void {
  const gs = groupSize(kind);
  const gb = groupBytes(kind) << 2;
  const shift = superblockShift(kind);
  const sbBytes = superblockBytes(kind);
  for (let r = 0; r < 4; r++) {
    let acc: f32 = 0;
    for (let b = 0; b < (numGroups >> shift); b++) {
      const sb = s + <usize>(b * sbBytes);
      let isc: i32 = 0, imin: i32 = 0;
      for (let j = 0; j < (1 << shift); j++) {
        const g = (b << shift) + j;
        const qg = q + <usize>(g * gb);
        const ag = qa + <usize>(g * gs);
        let isum: i32 = 0;
        for (let i = 0; i < gs; i++) isum += quantAt(kind, qg, r, i) * <i32>load<i8>(ag + i);
        if (kind == KIND_U6G16) {
          isum += zeroTerm(kind, ps + (<usize>g << 4), 32);
          isc += <i32>load<i8>(sb + 16 + <usize>((j << 2) + r)) * isum;
        } else {
          isc += <i32>load<u8>(sb + 32 + <usize>((j << 3) + r)) * isum;
          imin += <i32>load<u8>(sb + 36 + <usize>((j << 3) + r)) * load<i32>(bs + (<usize>g << 2));
        }
      }
      const d = load<f32>(sb + (<usize>r << 2));
      const dy = load<f32>(da + (<usize>b << 5));
      const t: f32 = kind == KIND_U6G16 ? (<f32>isc * d) * dy : (<f32>isc * d + <f32>imin * load<f32>(sb + 16 + (<usize>r << 2))) * dy;
      acc = acc + t;
    }
    store<f32>(out4 + (<usize>r << 2), acc);
  }
}
