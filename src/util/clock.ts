/**
 * The one clock every thread shares: milliseconds since the Unix epoch, sub-millisecond resolution.
 * `performance.now()` alone has a different origin in each Worker, so intervals that span the main
 * thread and an engine Worker (TTFT = first token - arrival) would be wrong without the origin.
 * @example const t0 = nowMs(); work(); const elapsedMs = nowMs() - t0;
 */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}
