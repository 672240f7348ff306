// gpt-oss's clamped SwiGLU for its experts (ggml_swiglu_oai, ggml-cpu ops.cpp ggml_compute_forward_swiglu_oai_f32);
// the SIMD path keeps the scalar op order per element, so every build gives the same bits.
import { expF32, expF32x4 } from "./common";

/**
 * out[i] = x / (1 + e^(-alpha x)) * (y + 1) with x = min(gate[i], limit), y = clamp(up[i], -limit, limit)
 * (gpt-oss: alpha 1.702, limit 7). out may alias gate or up.
 */
export function swiglu_oai(out: usize, gate: usize, up: usize, n: i32, alpha: f32, limit: f32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const lim = f32x4.splat(limit);
    const negLim = f32x4.splat(-limit);
    const negAlpha = f32x4.splat(-alpha);
    const one = f32x4.splat(1);
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i << 2;
      // pmin / pmax: x < limit ? x : limit without f32x4.min's NaN and -0 rules (the scalar loop's comparisons)
      const x = f32x4.pmin(v128.load(gate + o), lim);
      const y = f32x4.pmax(f32x4.pmin(v128.load(up + o), lim), negLim);
      const glu = f32x4.div(x, f32x4.add(one, expF32x4(f32x4.mul(negAlpha, x))));
      v128.store(out + o, f32x4.mul(glu, f32x4.add(y, one)));
    }
  }
  for (; i < n; i++) {
    const o = <usize>i << 2;
    const g = load<f32>(gate + o);
    const u = load<f32>(up + o);
    const x = limit < g ? limit : g;
    const yc = limit < u ? limit : u;
    const y = yc < -limit ? -limit : yc;
    store<f32>(out + o, (x / (1 + expF32(-alpha * x))) * (y + 1));
  }
}
