/**
 * Resizing an RGB image exactly as llama.cpp's tools/mtmd/mtmd-image.cpp img_tool::resize does: Pillow's separable
 * resampler (libImaging/Resample.c: filter widened when shrinking, weights normalised then held in 22-bit fixed point,
 * a horizontal pass then a vertical pass, each rounded to u8), and the aspect-preserving letterbox of PAD_CEIL (scale
 * to fit, sides rounded up, centred on a solid colour). Pure functions over interleaved RGB bytes.
 */
import type { ResizeAlgo } from "./mmproj.ts";

/** An 8-bit RGB image, rows top to bottom, pixels interleaved R, G, B. */
export interface RgbImage {
  readonly width: number;
  readonly height: number;
  /** [height][width][3] */
  readonly data: Uint8Array;
}

/** 32 bits less 8 for the pixel and 2 of headroom for the sum (Resample.c PRECISION_BITS) */
const PRECISION_BITS = 22;

const sinc = (x: number): number => (x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x));

/** Filter support radius and kernel per algorithm (Pillow's filters; bicubic with a = -0.5). */
const FILTERS: Readonly<Record<ResizeAlgo, { readonly support: number; readonly weight: (x: number) => number }>> = {
  bilinear: { support: 1, weight: (x) => { x = Math.abs(x); return x < 1 ? 1 - x : 0; } },
  bicubic: {
    support: 2,
    weight: (x) => {
      const a = -0.5;
      x = Math.abs(x);
      if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
      return 0;
    },
  },
  // Pillow's lanczos: sinc(x) * sinc(x / 3) on [-3, 3)
  lanczos: { support: 3, weight: (x) => (x >= -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0) },
};

interface Coefficients {
  readonly kernelSize: number;
  /** [outSize][2]: first input index, count */
  readonly bounds: Int32Array;
  /** [outSize][kernelSize] fixed-point weights */
  readonly weights: Int32Array;
}

/** The input range and fixed-point weights of every output pixel along one axis. */
function coefficients(inSize: number, outSize: number, algo: ResizeAlgo): Coefficients {
  const filter = FILTERS[algo];
  const scale = inSize / outSize;
  // shrinking widens the filter (anti-aliasing); growing keeps it sharp
  const filterScale = Math.max(scale, 1);
  const support = filter.support * filterScale;
  const kernelSize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const weights = new Int32Array(outSize * kernelSize);
  const pre = new Float64Array(kernelSize);
  for (let o = 0; o < outSize; o++) {
    const center = (o + 0.5) * scale;
    // C's int cast truncates toward zero; center - support + 0.5 can be negative, then clamped to 0 either way
    const first = Math.max(0, Math.trunc(center - support + 0.5));
    const count = Math.min(inSize, Math.trunc(center + support + 0.5)) - first;
    let total = 0;
    for (let k = 0; k < count; k++) {
      pre[k] = filter.weight((k + first - center + 0.5) * (1 / filterScale));
      total += pre[k]!;
    }
    for (let k = 0; k < kernelSize; k++) {
      const w = k < count && total !== 0 ? pre[k]! / total : 0;
      // Pillow rounds half away from zero by adding +-0.5 and truncating
      weights[o * kernelSize + k] = Math.trunc(w * 2 ** PRECISION_BITS + (w < 0 ? -0.5 : 0.5));
    }
    bounds[o * 2] = first;
    bounds[o * 2 + 1] = count;
  }
  return { kernelSize, bounds, weights };
}

const clip8 = (v: number): number => (v < 0 ? 0 : v > 255 ? 255 : v);

/**
 * One pass along x (stride 3 within a row) or y (stride of a row): out[o] = sum of weighted inputs, rounded at half
 * and shifted back. Integer sums stay below 2^31 (weights sum to 2^22, pixels < 2^8, headroom 2 bits).
 */
function resampleAxis(src: RgbImage, outWidth: number, outHeight: number, axis: "x" | "y", c: Coefficients): RgbImage {
  const out = new Uint8Array(outWidth * outHeight * 3); // [outHeight][outWidth][3]
  const half = 1 << (PRECISION_BITS - 1);
  for (let y = 0; y < outHeight; y++) {
    for (let x = 0; x < outWidth; x++) {
      const o = axis === "x" ? x : y;
      const first = c.bounds[o * 2]!;
      const count = c.bounds[o * 2 + 1]!;
      for (let ch = 0; ch < 3; ch++) {
        let sum = half;
        for (let k = 0; k < count; k++) {
          const sx = axis === "x" ? first + k : x;
          const sy = axis === "x" ? y : first + k;
          sum += src.data[(sy * src.width + sx) * 3 + ch]! * c.weights[o * c.kernelSize + k]!;
        }
        out[(y * outWidth + x) * 3 + ch] = clip8(sum >> PRECISION_BITS);
      }
    }
  }
  return { width: outWidth, height: outHeight, data: out };
}

/** Pillow's resize to width x height (mtmd-image.cpp resize_pillow): horizontal then vertical, each only if needed. */
export function resizeRgb(src: RgbImage, width: number, height: number, algo: ResizeAlgo): RgbImage {
  if (!(width > 0 && height > 0 && src.width > 0 && src.height > 0)) throw new Error(`cannot resize ${src.width}x${src.height} to ${width}x${height}`);
  let img = src;
  if (width !== img.width) img = resampleAxis(img, width, img.height, "x", coefficients(src.width, width, algo));
  if (height !== img.height) img = resampleAxis(img, img.width, height, "y", coefficients(src.height, height, algo));
  return img === src ? { width, height, data: src.data.slice() } : img;
}

/**
 * Fit inside width x height keeping the aspect ratio (each side ceil(side * scale), at most the target), centred
 * (offsets floored) on `pad` (img_tool::resize with PAD_CEIL); an image already that size is copied unchanged.
 */
export function resizeWithPad(src: RgbImage, width: number, height: number, algo: ResizeAlgo, pad: readonly [number, number, number] = [0, 0, 0]): RgbImage {
  if (src.width === width && src.height === height) return { width, height, data: src.data.slice() };
  // clip.cpp computes the scales in f32
  const scale = Math.min(Math.fround(width / src.width), Math.fround(height / src.height));
  const newWidth = Math.min(Math.ceil(Math.fround(src.width * scale)), width);
  const newHeight = Math.min(Math.ceil(Math.fround(src.height * scale)), height);
  const inner = resizeRgb(src, newWidth, newHeight, algo);
  const out = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) out.set(pad, i * 3);
  const ox = Math.floor((width - newWidth) / 2);
  const oy = Math.floor((height - newHeight) / 2);
  for (let y = 0; y < newHeight; y++) {
    out.set(inner.data.subarray(y * newWidth * 3, (y + 1) * newWidth * 3), ((y + oy) * width + ox) * 3);
  }
  return { width, height, data: out };
}
