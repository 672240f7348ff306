/** The two rounding rules ggml's quantizers use, so our blocks round the way llama.cpp's do. */

/** ggml `nearest_int`: round half to even, as the f32 magic-number trick (x + 1.5 * 2^23) does. */
export function nearestInt(x: number): number {
  return Math.fround(x + 12582912) - 12582912;
}

/** C `roundf`: half away from zero (Math.round rounds half up). */
export function roundAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}
