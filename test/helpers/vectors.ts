/** Vector comparisons the numeric tests share. */
import { expect } from "bun:test";

/** The largest |a[i] - b[i]|; the lengths must agree. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

/** `v` scaled to unit length. */
export function normalized(v: ArrayLike<number>): number[] {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!;
  const norm = Math.sqrt(sum);
  return Array.from(v, (x) => x / norm);
}
