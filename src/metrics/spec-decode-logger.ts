/**
 * The periodic `SpecDecoding metrics: ...` line of vLLM's console stat logger (vllm/v1/spec_decode/metrics.py,
 * SpecDecodingLogging.log): LoggingStatLogger prints it after its engine lines, every interval in which at least one
 * draft was verified. Rates are over the wall time since the previous line.
 */
import type { SpecDecodingStats, StepStats } from "../engine/stats.ts";

interface Interval {
  numDrafts: number;
  numDraftTokens: number;
  numAcceptedTokens: number;
  numAcceptedTokensPerPos: number[];
}

/** Python's "%.2f" etc. (toFixed rounds half away from zero on exact halves; Python rounds the binary value: same here) */
const fixed = (v: number, digits: number): string => (Number.isFinite(v) ? v.toFixed(digits) : "nan");

/**
 * One log line from an interval's sums, vLLM's format.
 * @example specDecodingLogLine({ numDrafts: 2, numDraftTokens: 8, numAcceptedTokens: 5, numAcceptedTokensPerPos: [2, 2, 1, 0] }, 10)
 * // "SpecDecoding metrics: Mean acceptance length: 3.50, Accepted throughput: 0.50 tokens/s, ..."
 */
export function specDecodingLogLine(s: SpecDecodingStats, elapsedS: number): string {
  const perPos = s.numAcceptedTokensPerPos.map((n) => fixed(n / s.numDrafts, 3)).join(", ");
  return `SpecDecoding metrics: Mean acceptance length: ${fixed(1 + s.numAcceptedTokens / s.numDrafts, 2)}, `
    + `Accepted throughput: ${fixed(s.numAcceptedTokens / elapsedS, 2)} tokens/s, Drafted throughput: ${fixed(s.numDraftTokens / elapsedS, 2)} tokens/s, `
    + `Accepted: ${s.numAcceptedTokens} tokens, Drafted: ${s.numDraftTokens} tokens, Per-position acceptance rate: ${perPos}, `
    + `Avg Draft acceptance rate: ${fixed((s.numAcceptedTokens / s.numDraftTokens) * 100, 1)}%`;
}

/**
 * Sums the steps' spec-decode stats between two stats lines (vLLM SpecDecodingLogging: observe, then log).
 * @example const spec = new SpecDecodingLogging(4); spec.observe(stats); const line = spec.takeLine(10);
 */
export class SpecDecodingLogging {
  private interval: Interval;

  constructor(private readonly numSpeculativeTokens: number) {
    this.interval = this.empty();
  }

  private empty(): Interval {
    return { numDrafts: 0, numDraftTokens: 0, numAcceptedTokens: 0, numAcceptedTokensPerPos: new Array<number>(this.numSpeculativeTokens).fill(0) };
  }

  observe(stats: StepStats): void {
    const s = stats.specDecoding;
    if (!s) return;
    const i = this.interval;
    i.numDrafts += s.numDrafts;
    i.numDraftTokens += s.numDraftTokens;
    i.numAcceptedTokens += s.numAcceptedTokens;
    s.numAcceptedTokensPerPos.forEach((n, pos) => { if (pos < i.numAcceptedTokensPerPos.length) i.numAcceptedTokensPerPos[pos]! += n; });
  }

  /** the interval's line, null when it saw no drafts (vLLM logs nothing then); starts a new interval */
  takeLine(elapsedS: number): string | null {
    const i = this.interval;
    this.interval = this.empty();
    return i.numDrafts > 0 ? specDecodingLogLine(i, elapsedS) : null;
  }
}
