/** The two rounding rules ggml's quantizers use, so our blocks round the way llama.cpp's do. */

/** ggml `nearest_int`: round half to even, as the f32 magic-number trick (x + 1.5 * 2^23) does. */
export function nearestInt(x: number): number {
  return Math.fround(x + 12582912) - 12582912;
}

/** C `roundf`: half away from zero (Math.round rounds half up; trunc(x +- 0.5) differs only within 2^-53 of a half). */
export function roundAway(x: number): number {
  return Math.trunc(x < 0 ? x - 0.5 : x + 0.5);
}
