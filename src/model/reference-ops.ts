/**
 * The oracle's leaf ops (llama2.c names): plain f32 loops over Float32Arrays, one per step of reference-forward.ts.
 */

/** out = x / rms(x) * weight, over n elements starting at offset (used per head for QK-norm too) */
export function rmsnorm(out: Float32Array, x: Float32Array, weight: Float32Array, n: number, eps: number, offset = 0): void {
  let sumSq = 0;
  for (let i = 0; i < n; i++) sumSq += x[offset + i]! * x[offset + i]!;
  const scale = 1 / Math.sqrt(sumSq / n + eps);
  for (let i = 0; i < n; i++) out[offset + i] = x[offset + i]! * scale * weight[i]!;
}

/** out[rows] = W[rows, cols] . x[cols] */
export function matmul(out: Float32Array, x: Float32Array, w: Float32Array, cols: number, rows: number): void {
  for (let r = 0; r < rows; r++) {
    let acc = 0;
    const base = r * cols;
    for (let c = 0; c < cols; c++) acc += w[base + c]! * x[c]!;
    out[r] = acc;
  }
}

export function addInPlace(x: Float32Array, b: Float32Array): void {
  for (let i = 0; i < b.length; i++) x[i]! += b[i]!;
}

/**
 * Rotates the first ropeDim dims of each head of vec [numHeads * headDim] by the angles of its position, theta_i =
 * pos * thetas[i] (base^(-2i/ropeDim) unscaled: rope-scaling.ts), and scales the turned pairs by mscale (1 unless
 * YaRN / LongRoPE). Normal rope (llama) pairs dims (2i, 2i+1); NEOX rope (qwen2/3, gemma3, phi3) pairs (i, i + ropeDim/2).
 */
export function rope(vec: Float32Array, numHeads: number, headDim: number, ropeDim: number, angles: ArrayLike<number>, mscale: number, neox: boolean): void {
  const half = ropeDim / 2;
  for (let h = 0; h < numHeads; h++) {
    const base = h * headDim;
    for (let i = 0; i < half; i++) {
      const theta = angles[i]!;
      const cos = Math.cos(theta) * mscale;
      const sin = Math.sin(theta) * mscale;
      const a = neox ? base + i : base + 2 * i;
      const b = neox ? base + i + half : base + 2 * i + 1;
      const x0 = vec[a]!;
      const x1 = vec[b]!;
      vec[a] = x0 * cos - x1 * sin;
      vec[b] = x0 * sin + x1 * cos;
    }
  }
}

/** In place softmax over x[0..n) */
export function softmax(x: Float32Array, n: number): void {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[i]! > max) max = x[i]!;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    x[i] = Math.exp(x[i]! - max);
    sum += x[i]!;
  }
  for (let i = 0; i < n; i++) x[i] = x[i]! / sum;
}

export const silu = (x: number): number => x / (1 + Math.exp(-x));

/** softmax whose denominator also holds e^sink (an attention sink: a logit with no value row) */
export function softmaxWithSink(x: Float32Array, n: number, sink: number): void {
  let max = sink;
  for (let i = 0; i < n; i++) if (x[i]! > max) max = x[i]!;
  let sum = Math.exp(sink - max);
  for (let i = 0; i < n; i++) {
    x[i] = Math.exp(x[i]! - max);
    sum += x[i]!;
  }
  for (let i = 0; i < n; i++) x[i] = x[i]! / sum;
}

/**
 * gpt-oss's clamped SwiGLU (ggml swiglu_oai, alpha 1.702, limit 7): x = min(gate, 7), y = clamp(up, -7, 7),
 * x * sigmoid(1.702 x) * (y + 1)
 */
export const swigluOai = (gate: number, up: number): number => {
  const x = Math.min(gate, 7);
  const y = Math.min(Math.max(up, -7), 7);
  return (x / (1 + Math.exp(-1.702 * x))) * (y + 1);
};

/** GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (ggml_gelu_f32, gelu_pytorch_tanh) */
export const gelu = (x: number): number => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * x * (1 + 0.044715 * x * x)));
