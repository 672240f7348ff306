/**
 * The periodic engine stats line, as vLLM's LoggingStatLogger (vllm/v1/metrics/loggers.py) prints it every
 * VLLM_LOG_STATS_INTERVAL seconds (default 10), one line per engine:
 * `Engine 000: Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 45.6 tokens/s, Running: 2 reqs,
 * Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 50.0%`. As in vLLM the line is INFO while there
 * is work and DEBUG once an interval and the one before it saw no tokens (no noise on an idle server). The prefix
 * cache hit rate is over the most recent lookups (vLLM's CachingMetrics keeps the last 1000 requests; here the last
 * 1000 steps that looked anything up).
 * @example const stats = new LoggingStatLogger(log, 10); listener = fanOut(recorder, stats); stats.start();
 */
import type { FinishedRequestStats, IterationStats, StatsListener } from "../frontend/iteration-stats.ts";
import type { Logger } from "../util/logger.ts";
import { SpecDecodingLogging } from "./spec-decode-logger.ts";
import { NixlLogging } from "./nixl-logger.ts";

const RECENT_LOOKUPS = 1000;

interface EngineWindow {
  promptTokens: number;
  generationTokens: number;
  lastPromptThroughput: number;
  lastGenerationThroughput: number;
  running: number;
  waiting: number;
  kvCacheUsage: number;
  lookups: { queries: number; hits: number }[];
}

export class LoggingStatLogger implements StatsListener {
  private readonly engines = new Map<number, EngineWindow>();
  private lastLogMs = performance.now();
  private timer: ReturnType<typeof setInterval> | null = null;

  /** with --speculative-config: vLLM's SpecDecoding line after the engine lines */
  private readonly specDecoding: SpecDecodingLogging | null;
  /** with the NixlConnector: vLLM's KV Transfer metrics line */
  private readonly nixl = new NixlLogging();

  constructor(private readonly log: Logger, private readonly intervalS: number, engineIndices: readonly number[] = [0], numSpeculativeTokens: number | null = null) {
    for (const index of engineIndices) this.window(index);
    this.specDecoding = numSpeculativeTokens ? new SpecDecodingLogging(numSpeculativeTokens) : null;
  }

  private window(index: number): EngineWindow {
    let w = this.engines.get(index);
    if (w === undefined) {
      w = { promptTokens: 0, generationTokens: 0, lastPromptThroughput: 0, lastGenerationThroughput: 0, running: 0, waiting: 0, kvCacheUsage: 0, lookups: [] };
      this.engines.set(index, w);
    }
    return w;
  }

  onStep(stats: IterationStats): void {
    const w = this.window(stats.engineIndex);
    this.specDecoding?.observe(stats);
    this.nixl.observe(stats);
    w.promptTokens += stats.numPromptTokens;
    w.generationTokens += stats.numGenerationTokens;
    w.running = stats.numRunning;
    w.waiting = stats.numWaiting;
    w.kvCacheUsage = stats.kvCacheUsage;
    if (stats.prefixCacheQueries > 0) {
      w.lookups.push({ queries: stats.prefixCacheQueries, hits: stats.prefixCacheHits });
      if (w.lookups.length > RECENT_LOOKUPS) w.lookups.shift();
    }
  }

  onRequestFinished(_stats: FinishedRequestStats): void {}

  /** Writes one line per engine for the time since the previous call and starts a new window. */
  logNow(nowMs = performance.now()): void {
    const elapsedS = Math.max((nowMs - this.lastLogMs) / 1000, 1e-9);
    this.lastLogMs = nowMs;
    for (const [index, w] of [...this.engines].sort(([a], [b]) => a - b)) {
      const prompt = w.promptTokens / elapsedS;
      const generation = w.generationTokens / elapsedS;
      const idle = prompt === 0 && generation === 0 && w.lastPromptThroughput === 0 && w.lastGenerationThroughput === 0;
      w.promptTokens = 0;
      w.generationTokens = 0;
      w.lastPromptThroughput = prompt;
      w.lastGenerationThroughput = generation;
      const queries = w.lookups.reduce((s, l) => s + l.queries, 0);
      const hitRate = queries === 0 ? 0 : w.lookups.reduce((s, l) => s + l.hits, 0) / queries;
      this.log.log(idle ? "DEBUG" : "INFO",
        `Engine ${String(index).padStart(3, "0")}: Avg prompt throughput: ${prompt.toFixed(1)} tokens/s, ` +
        `Avg generation throughput: ${generation.toFixed(1)} tokens/s, Running: ${w.running} reqs, Waiting: ${w.waiting} reqs, ` +
        `GPU KV cache usage: ${(w.kvCacheUsage * 100).toFixed(1)}%, Prefix cache hit rate: ${(hitRate * 100).toFixed(1)}%`);
    }
    const specLine = this.specDecoding?.takeLine(elapsedS) ?? null;
    if (specLine !== null) this.log.info(specLine);
    const nixlLine = this.nixl.takeLine();
    if (nixlLine !== null) this.log.info(nixlLine);
  }

  start(): void {
    if (this.timer !== null) return;
    this.lastLogMs = performance.now();
    this.timer = setInterval(() => this.logNow(), this.intervalS * 1000);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
