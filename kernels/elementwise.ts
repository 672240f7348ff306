// Row-wise and element-wise ops. They are cheap next to the matmuls, so they run on the calling thread.
// The SIMD paths keep the scalar op order per element, so every build gives the same bits.
import { expF32, expF32x4 } from "./common";

/** out[r] = x[r] * (1 / sqrt(mean(x[r]^2) + eps)) * w, numRows rows of dim; sum of squares in f64. */
export function rms_norm(out: usize, x: usize, w: usize, numRows: i32, dim: i32, eps: f32): void {
  for (let r = 0; r < numRows; r++) {
    const xr = x + (<usize>(r * dim) << 2);
    const or = out + (<usize>(r * dim) << 2);
    let sumSq: f64 = 0;
    for (let i = 0; i < dim; i++) {
      const v = <f64>load<f32>(xr + (<usize>i << 2));
      sumSq += v * v;
    }
    const scale = <f32>(1 / Math.sqrt(sumSq / <f64>dim + <f64>eps));
    for (let i = 0; i < dim; i++) {
      const o = <usize>i << 2;
      store<f32>(or + o, load<f32>(xr + o) * scale * load<f32>(w + o));
    }
  }
}

/**
 * table [numRows, ropeDim / 2, 2] f32 = (cos, sin) x mscale of theta = pos * thetas[i] (f64 [ropeDim / 2], the model's
 * scaled angles: model/rope-scaling.ts) for positions i32 [numRows]: the same for every layer and head, so a step
 * computes it once (see rope).
 */
export function rope_table(table: usize, positions: usize, numRows: i32, ropeDim: i32, thetas: usize, mscale: f64): void {
  const half = ropeDim >> 1;
  for (let r = 0; r < numRows; r++) {
    const pos = <f64>load<i32>(positions + (<usize>r << 2));
    const row = table + (<usize>(r * half) << 3);
    for (let i = 0; i < half; i++) {
      const theta = pos * load<f64>(thetas + (<usize>i << 3));
      store<f32>(row + (<usize>i << 3), <f32>(Math.cos(theta) * mscale));
      store<f32>(row + (<usize>i << 3), <f32>(Math.sin(theta) * mscale), 4);
    }
  }
}

/** In place on x [numRows, numHeads * headDim] with rope_table's table. NEOX pairs (i, i + ropeDim/2), else (2i, 2i+1). */
export function rope(x: usize, table: usize, numRows: i32, numHeads: i32, headDim: i32, ropeDim: i32, neox: i32): void {
  const half = ropeDim >> 1;
  for (let r = 0; r < numRows; r++) {
    const xr = x + (<usize>(r * numHeads * headDim) << 2);
    const row = table + (<usize>(r * half) << 3);
    for (let i = 0; i < half; i++) {
      const cos = load<f32>(row + (<usize>i << 3));
      const sin = load<f32>(row + (<usize>i << 3), 4);
      const a = neox ? i : 2 * i;
      const b = neox ? i + half : 2 * i + 1;
      for (let h = 0; h < numHeads; h++) {
        const base = xr + (<usize>(h * headDim) << 2);
        const pa = base + (<usize>a << 2);
        const pb = base + (<usize>b << 2);
        const x0 = load<f32>(pa);
        const x1 = load<f32>(pb);
        store<f32>(pa, x0 * cos - x1 * sin);
        store<f32>(pb, x0 * sin + x1 * cos);
      }
    }
  }
}

/** out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i] */
export function silu_mul(out: usize, gate: usize, up: usize, n: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i << 2;
      const g = v128.load(gate + o);
      const sig = f32x4.div(g, f32x4.add(f32x4.splat(1), expF32x4(f32x4.neg(g))));
      v128.store(out + o, f32x4.mul(sig, v128.load(up + o)));
    }
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    const g = load<f32>(gate + o);
    store<f32>(out + o, (g / (1 + expF32(-g))) * load<f32>(up + o));
  }
}

/**
 * out[i] = gelu(gate[i]) * up[i], GELU's tanh approximation (gemma3's GeGLU, ggml_gelu_f32) written as
 * x * sigmoid(2u) = x / (1 + e^(-2u)), u = sqrt(2/pi) * (x + 0.044715 x^3), which equals 0.5 x (1 + tanh(u)).
 */
export function gelu_mul(out: usize, gate: usize, up: usize, n: i32): void {
  const c: f32 = 1.5957691216057308; // 2 * sqrt(2 / pi)
  const a: f32 = 0.044715;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const cv = f32x4.splat(c);
    const av = f32x4.splat(a);
    const one = f32x4.splat(1);
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i << 2;
      const g = v128.load(gate + o);
      const u2 = f32x4.mul(f32x4.mul(cv, g), f32x4.add(one, f32x4.mul(av, f32x4.mul(g, g))));
      const gelu = f32x4.div(g, f32x4.add(one, expF32x4(f32x4.neg(u2))));
      v128.store(out + o, f32x4.mul(gelu, v128.load(up + o)));
    }
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    const g = load<f32>(gate + o);
    const u2 = (c * g) * (1 + a * (g * g));
    store<f32>(out + o, (g / (1 + expF32(-u2))) * load<f32>(up + o));
  }
}

/** x[i] *= s in place (gemma3's embedding scale, a query pre-scale) */
export function scale(x: usize, s: f32, n: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const sv = f32x4.splat(s);
    for (; i + 4 <= n; i += 4) v128.store(x + (<usize>i << 2), f32x4.mul(v128.load(x + (<usize>i << 2)), sv));
  }
  for (; i < n; i++) store<f32>(x + (<usize>i << 2), load<f32>(x + (<usize>i << 2)) * s);
}

/** out[i] = a[i] + b[i]; out may alias a */
export function add(out: usize, a: usize, b: usize, n: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i << 2;
      v128.store(out + o, f32x4.add(v128.load(a + o), v128.load(b + o)));
    }
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    store<f32>(out + o, load<f32>(a + o) + load<f32>(b + o));
  }
}

/** x[r] += bias for numRows rows of n */
export function add_bias(x: usize, bias: usize, numRows: i32, n: i32): void {
  for (let r = 0; r < numRows; r++) add(x + (<usize>(r * n) << 2), x + (<usize>(r * n) << 2), bias, n);
}
