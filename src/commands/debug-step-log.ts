/**
 * VLLM_LOGGING_LEVEL=DEBUG's per-step and per-request detail in the server log: each engine step's scheduling
 * decision (sequences and tokens scheduled, running / waiting / preempted, prefix-cache hits, KV usage, step time),
 * each finished request's prefix-cache hits and times, and the engine thread's own DEBUG lines (grammar compile
 * times), as vLLM's scheduler and structured-output manager log at DEBUG. Steps are capped at a number of lines a
 * second (a busy server runs hundreds): the ones over it are counted in one line.
 * @example listener.targets.push(new DebugStepLog(log.child("scheduler.ts")));
 */
import type { FinishedRequestStats, IterationStats, StatsListener } from "../frontend/iteration-stats.ts";
import type { Logger } from "../util/logger.ts";

/** step lines a second before they are counted instead of written */
const MAX_STEP_LINES_PER_S = 20;
const ms = (seconds: number): string => `${(seconds * 1000).toFixed(1)} ms`;

export class DebugStepLog implements StatsListener {
  private windowStartMs = 0;
  private linesInWindow = 0;
  private notShown = 0;

  constructor(private readonly log: Logger, private readonly nowMs: () => number = () => performance.now(), private readonly maxPerS = MAX_STEP_LINES_PER_S) {}

  onStep(s: IterationStats): void {
    for (const line of s.debugLines ?? []) this.log.debug(line);
    if (s.batchSize === 0) return;
    const now = this.nowMs();
    if (now - this.windowStartMs >= 1000) {
      if (this.notShown > 0) this.log.debug(`(${this.notShown} engine steps not shown: more than ${this.maxPerS} a second)`);
      this.windowStartMs = now;
      this.linesInWindow = 0;
      this.notShown = 0;
    }
    if (this.linesInWindow >= this.maxPerS) { this.notShown++; return; }
    this.linesInWindow++;
    this.log.debug(`Engine ${String(s.engineIndex).padStart(3, "0")} step ${s.batchId}: scheduled ${s.batchSize} seqs, ${s.numPromptTokens} prompt + ${s.numGenerationTokens} generation tokens; ` +
      `running ${s.numRunning}, waiting ${s.numWaiting}, preempted ${s.numPreempted}; prefix cache hits ${s.prefixCacheHits} of ${s.prefixCacheQueries} tokens; ` +
      `KV cache ${(s.kvCacheUsage * 100).toFixed(1)}% used; ${(s.stepEndMs - s.stepStartMs).toFixed(1)} ms`);
  }

  onRequestFinished(r: FinishedRequestStats): void {
    this.log.debug(`Request ${r.requestId} finished (${r.clientAborted ? "aborted by the client" : r.finishReason}): ${r.numPromptTokens} prompt tokens, ` +
      `${r.numCachedTokens} of them prefix-cache hits; ${r.numGenerationTokens} generated; queued ${ms(r.queuedTimeS)}, prefill ${ms(r.prefillTimeS)}, e2e ${ms(r.e2eLatencyS)}`);
  }
}
