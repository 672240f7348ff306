/**
 * `fennec bench serve`'s figures from the per-request outputs, computed, printed and saved as vLLM does
 * (vllm/benchmarks/serve.py: calculate_metrics, the printed block of benchmark(), save_to_pytorch... keys of
 * the result dict). Pure: tests feed outputs and read the block and the JSON.
 */
import { METRIC_NAMES, type MetricName } from "../command-line/bench-serve-config.ts";

/** One request's outcome (vLLM RequestFuncOutput), times in seconds. */
export interface RequestOutput {
  readonly success: boolean;
  readonly promptLen: number;
  readonly outputTokens: number;
  readonly ttft: number;
  readonly itl: readonly number[];
  readonly latency: number;
  /** seconds since the benchmark started */
  readonly startTime: number;
  readonly generatedText: string;
  readonly error: string;
}

const METRIC_HEADERS: Readonly<Record<MetricName, [string, string]>> = {
  ttft: ["Time to First Token", "TTFT"],
  tpot: ["Time per Output Token (excl. 1st token)", "TPOT"],
  itl: ["Inter-token Latency", "ITL"],
  e2el: ["End-to-end Latency", "E2EL"],
};

export interface MetricStats {
  readonly mean: number;
  readonly median: number;
  readonly std: number;
  readonly percentiles: readonly [number, number][];
}

export interface BenchmarkMetrics {
  readonly completed: number;
  readonly failed: number;
  readonly totalInput: number;
  readonly totalOutput: number;
  readonly requestThroughput: number;
  readonly requestGoodput: number | null;
  readonly outputThroughput: number;
  readonly totalTokenThroughput: number;
  readonly maxOutputTokensPerS: number;
  readonly maxConcurrentRequests: number;
  /** milliseconds */
  readonly stats: Readonly<Record<MetricName, MetricStats>>;
}

/** numpy.percentile (linear interpolation) of an unsorted list; numpy on [0] for an empty list, as vLLM's `or 0`. */
export function percentile(values: readonly number[], p: number): number {
  const v = values.length === 0 ? [0] : [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (v.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(v.length - 1, lo + 1);
  return v[lo]! + (v[hi]! - v[lo]!) * (rank - lo);
}

function stats(valuesS: readonly number[], percentiles: readonly number[]): MetricStats {
  const ms = valuesS.length === 0 ? [0] : valuesS.map((v) => v * 1000);
  const mean = ms.reduce((s, x) => s + x, 0) / ms.length;
  const std = Math.sqrt(ms.reduce((s, x) => s + (x - mean) ** 2, 0) / ms.length);
  return { mean, median: percentile(ms, 50), std, percentiles: percentiles.map((p) => [p, percentile(ms, p)] as [number, number]) };
}

/** vLLM calculate_metrics: SLOs in ms (goodput), duration in seconds. */
export function calculateMetrics(outputs: readonly RequestOutput[], durationS: number, percentiles: readonly number[], goodput: Readonly<Partial<Record<MetricName, number>>> | null): BenchmarkMetrics {
  const ttfts: number[] = [], tpots: number[] = [], itls: number[] = [], e2els: number[] = [];
  let completed = 0, totalInput = 0, totalOutput = 0, good = 0;
  for (const o of outputs) {
    if (!o.success) continue;
    completed++;
    totalInput += o.promptLen;
    totalOutput += o.outputTokens;
    const tpot = o.outputTokens > 1 ? (o.latency - o.ttft) / (o.outputTokens - 1) : null;
    if (tpot !== null) tpots.push(tpot);
    itls.push(...o.itl);
    ttfts.push(o.ttft);
    e2els.push(o.latency);
    if (goodput !== null) {
      const ok = (goodput.ttft === undefined || o.ttft * 1000 <= goodput.ttft)
        && (goodput.tpot === undefined || (tpot ?? 0) * 1000 <= goodput.tpot)
        && (goodput.e2el === undefined || o.latency * 1000 <= goodput.e2el);
      if (ok) good++;
    }
  }
  // peak output tokens/s and concurrency: one-second buckets, one token per chunk at start + ttft + itl...
  const done = outputs.filter((o) => o.success);
  let maxOutputTokensPerS = 0, maxConcurrentRequests = 0;
  if (done.length > 0) {
    const start = Math.min(...done.map((o) => o.startTime));
    const end = Math.max(...done.map((o) => o.startTime + o.latency));
    const buckets = Math.ceil(end - start) + 1;
    const tokens = new Array<number>(buckets).fill(0);
    const concurrent = new Array<number>(buckets).fill(0);
    for (const o of done) {
      let t = o.startTime + o.ttft;
      const times = [t, ...o.itl.map((gap) => (t += gap))];
      for (const time of times) {
        const b = Math.floor(time - start);
        if (b < buckets) tokens[b]!++;
      }
      for (let b = Math.floor(o.startTime - start); b <= Math.floor(o.startTime + o.latency - start) && b < buckets; b++) concurrent[b]!++;
    }
    maxOutputTokensPerS = Math.max(...tokens);
    maxConcurrentRequests = Math.max(...concurrent);
  }
  return {
    completed, failed: outputs.length - completed, totalInput, totalOutput,
    requestThroughput: completed / durationS, requestGoodput: goodput === null ? null : good / durationS,
    outputThroughput: totalOutput / durationS, totalTokenThroughput: (totalInput + totalOutput) / durationS,
    maxOutputTokensPerS, maxConcurrentRequests,
    stats: { ttft: stats(ttfts, percentiles), tpot: stats(tpots, percentiles), itl: stats(itls, percentiles), e2el: stats(e2els, percentiles) },
  };
}

/** Python's "{:^50}".format with a fill character (the extra space goes right). */
function centre(text: string, fill: string): string {
  const pad = Math.max(0, 50 - text.length);
  return fill.repeat(Math.floor(pad / 2)) + text + fill.repeat(pad - Math.floor(pad / 2));
}
const row = (label: string, value: number, int = false): string => `${label.padEnd(40)} ${(int ? String(value) : value.toFixed(2)).padEnd(10)}`;
/** vLLM prints P99, P99.9: the int when the percentile is integral */
const pWord = (p: number): string => (Number.isInteger(p) ? String(p) : String(p));

export interface RunFacts {
  readonly requestRate: number;
  readonly maxConcurrency: number | null;
  readonly durationS: number;
  readonly selected: readonly MetricName[];
}

/** The block vLLM prints after a run, line for line. */
export function resultBlock(m: BenchmarkMetrics, run: RunFacts): string {
  const lines = [centre(" Serving Benchmark Result ", "="), row("Successful requests:", m.completed, true), row("Failed requests:", m.failed, true)];
  if (run.maxConcurrency !== null) lines.push(row("Maximum request concurrency:", run.maxConcurrency, true));
  if (Number.isFinite(run.requestRate)) lines.push(row("Request rate configured (RPS):", run.requestRate));
  lines.push(
    row("Benchmark duration (s):", run.durationS), row("Total input tokens:", m.totalInput, true), row("Total generated tokens:", m.totalOutput, true),
    row("Request throughput (req/s):", m.requestThroughput),
  );
  if (m.requestGoodput !== null) lines.push(row("Request goodput (req/s):", m.requestGoodput));
  lines.push(
    row("Output token throughput (tok/s):", m.outputThroughput), row("Peak output token throughput (tok/s):", m.maxOutputTokensPerS),
    row("Peak concurrent requests:", m.maxConcurrentRequests), row("Total token throughput (tok/s):", m.totalTokenThroughput),
  );
  for (const name of METRIC_NAMES) {
    if (!run.selected.includes(name)) continue;
    const [header, short] = METRIC_HEADERS[name];
    const s = m.stats[name];
    lines.push(centre(header, "-"), row(`Mean ${short} (ms):`, s.mean), row(`Median ${short} (ms):`, s.median));
    for (const [p, v] of s.percentiles) lines.push(row(`P${pWord(p)} ${short} (ms):`, v));
  }
  lines.push("=".repeat(50));
  return lines.join("\n");
}

export interface ResultHeader {
  readonly date: string;
  readonly backend: string;
  readonly label: string | null;
  readonly modelId: string;
  readonly tokenizerId: string;
  readonly numPrompts: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly requestRate: number;
  readonly burstiness: number;
  readonly maxConcurrency: number | null;
}

/** The saved JSON, keys in vLLM's order; the per-request lists only with --save-detailed. */
export function resultJson(h: ResultHeader, m: BenchmarkMetrics, outputs: readonly RequestOutput[], durationS: number, selected: readonly MetricName[], detailed: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {
    date: h.date, endpoint_type: h.backend, backend: h.backend, label: h.label, model_id: h.modelId, tokenizer_id: h.tokenizerId, num_prompts: h.numPrompts,
    ...h.metadata,
    request_rate: Number.isFinite(h.requestRate) ? h.requestRate : "inf", burstiness: h.burstiness, max_concurrency: h.maxConcurrency,
    duration: durationS, completed: m.completed, failed: m.failed, total_input_tokens: m.totalInput, total_output_tokens: m.totalOutput,
    request_throughput: m.requestThroughput, request_goodput: m.requestGoodput, output_throughput: m.outputThroughput, total_token_throughput: m.totalTokenThroughput,
  };
  if (detailed) {
    Object.assign(out, {
      input_lens: outputs.map((o) => o.promptLen), output_lens: outputs.map((o) => (o.success ? o.outputTokens : 0)), ttfts: outputs.map((o) => o.ttft),
      itls: outputs.map((o) => o.itl), start_times: outputs.map((o) => o.startTime), generated_texts: outputs.map((o) => o.generatedText), errors: outputs.map((o) => o.error),
    });
  }
  out.max_output_tokens_per_s = m.maxOutputTokensPerS;
  out.max_concurrent_requests = m.maxConcurrentRequests;
  out.rtfx = 0;
  for (const name of selected) {
    const s = m.stats[name];
    out[`mean_${name}_ms`] = s.mean;
    out[`median_${name}_ms`] = s.median;
    out[`std_${name}_ms`] = s.std;
    for (const [p, v] of s.percentiles) out[`p${pWord(p)}_${name}_ms`] = v;
  }
  return out;
}

/** vLLM's default result file name: {label}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json (rate as Python prints a float). */
export function defaultResultFilename(label: string, requestRate: number, maxConcurrency: number | null, modelId: string, date: string): string {
  const rate = Number.isFinite(requestRate) ? (Number.isInteger(requestRate) ? `${requestRate}.0` : String(requestRate)) : "inf";
  return `${label}-${rate}qps${maxConcurrency === null ? "" : `-concurrency${maxConcurrency}`}-${modelId.split("/").pop()}-${date}.json`;
}
