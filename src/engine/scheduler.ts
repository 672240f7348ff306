/**
 * The scheduler (vLLM V1 Scheduler): FCFS waiting and running queues, one token budget per step shared by decode
 * tokens and prefill chunks (chunked prefill), preemption by recompute when the KV cache is full. Pure integers:
 * token counts and block ids; it never sees logits or memory.
 *
 * Each step: running requests first (in order), each gets the tokens it still lacks up to the budget; if its blocks
 * cannot be allocated the newest running request is preempted (blocks freed, back to the head of the waiting queue,
 * recomputed later) until it fits or it was itself the newest. Then, if nothing was preempted, waiting requests are
 * admitted in order while budget, max-num-seqs and blocks allow; their cached prefix blocks are reused. A request whose
 * grammar is still compiling keeps its place and is passed over (vLLM skips WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR).
 */
import type { KvCacheManager } from "./kv-cache-manager.ts";
import type { KvConnector } from "./kv-connector/kv-connector.ts";
import type { RequestState } from "./request.ts";

export interface SchedulerConfig {
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly maxModelLen: number;
  /**
   * logit rows one step may spend on prompt logprobs (each prompt position then needs a full vocabulary row): a
   * request with prompt_logprobs gets its prefill in chunks of at most this many tokens; absent = no bound
   */
  readonly maxPromptLogprobRows?: number;
  /** speculative decoding: tokens (decode + drafted) a step with drafts may hold, shared evenly by the decoding
   * requests (absent: no cap) */
  readonly maxDraftTokensPerStep?: number | null;
  /**
   * --scheduling-policy (vLLM SchedulerConfig.policy): "fcfs" (default) or "priority": waiting requests by (priority,
   * arrival), lower first, and the running request with the highest (priority, arrival) is preempted first
   */
  readonly schedulingPolicy?: "fcfs" | "priority";
  /**
   * false (a bidirectional model, vLLM's encoder-only pooling models): a prompt is computed whole in one step, never in
   * chunks; a waiting request whose prompt does not fit in what is left of the step's budget waits for the next step
   * (vLLM Scheduler.schedule: "chunked prefill has to be enabled explicitly"). Absent: chunked prefill.
   */
  readonly chunkedPrefill?: boolean;
  /**
   * --max-loras: distinct LoRA adapters the running requests may hold; a waiting request whose adapter would be one
   * more is passed over (vLLM Scheduler.schedule: `len(scheduled_loras) == max_loras and lora_id not in ...`). Absent: no adapters.
   */
  readonly maxLoras?: number;
}

/** vLLM's priority order: lower priority value first, then earlier arrival */
const before = (a: RequestState, b: RequestState): boolean =>
  a.sampling.priority < b.sampling.priority || (a.sampling.priority === b.sampling.priority && a.times.arrivalMs < b.times.arrivalMs);

/**
 * One request's share of a step: positions [startPos, startPos + numNewTokens) are computed. The last
 * `draftTokenIds.length` of them are drafted tokens to verify (speculative decoding; vLLM scheduled_spec_decode_tokens).
 */
export interface ScheduledChunk {
  readonly request: RequestState;
  readonly startPos: number;
  readonly numNewTokens: number;
  readonly draftTokenIds: readonly number[];
}

const NO_DRAFTS: readonly number[] = [];

export interface SchedulerOutput {
  readonly chunks: readonly ScheduledChunk[];
  readonly numPreempted: number;
  /** waiting requests skipped because their next prompt block is being computed by a running request */
  readonly numDeferred: number;
}

export class Scheduler {
  readonly waiting: RequestState[] = [];
  readonly running: RequestState[] = [];

  constructor(
    private readonly config: SchedulerConfig,
    private readonly kv: KvCacheManager,
    private readonly nowMs: () => number,
    /** the KV offload tier, when configured: loads prefix blocks back before a request is admitted */
    private readonly connector: KvConnector | null = null,
  ) {}

  get numUnfinished(): number {
    return this.waiting.length + this.running.length + (this.connector?.numLoading ?? 0);
  }

  add(request: RequestState): void {
    request.status = "waiting";
    if (this.config.schedulingPolicy !== "priority") { this.waiting.push(request); return; }
    let at = this.waiting.length;
    while (at > 0 && before(request, this.waiting[at - 1]!)) at--;
    this.waiting.splice(at, 0, request);
  }

  /** FCFS: the newest running request; priority: the one with the highest (priority, arrival) (vLLM). */
  private victimIndex(): number {
    if (this.config.schedulingPolicy !== "priority") return this.running.length - 1;
    let worst = 0;
    for (let r = 1; r < this.running.length; r++) if (before(this.running[worst]!, this.running[r]!)) worst = r;
    return worst;
  }

  schedule(): SchedulerOutput {
    let budget = this.config.maxNumBatchedTokens;
    let promptLogitBudget = this.config.maxPromptLogprobRows ?? Infinity;
    /** numNew cut to the prompt-logprob rows left, for a chunk starting at `startPos` that needs them */
    const capForPromptLogits = (request: RequestState, startPos: number, numNew: number): number => {
      if (request.promptLogprobs === null || request.promptLogprobsSent || startPos >= request.numPromptTokens - 1) return numNew;
      const capped = Math.min(numNew, promptLogitBudget);
      promptLogitBudget -= Math.max(0, capped);
      return capped;
    };
    const chunks: ScheduledChunk[] = [];
    let numPreempted = 0;
    let numDeferred = 0;
    // requests whose offload load finished go back first, in the order they came
    if (this.connector !== null) this.waiting.unshift(...this.connector.takeLoaded());

    // a CPU step stays about as cheap as one token only while it is memory-bound: the draft cap is shared by every
    // decoding request, so a big batch (compute-bound already) verifies few or no drafts
    const draftCap = this.config.maxDraftTokensPerStep ?? null;
    let numDecoding = 0;
    if (draftCap !== null) for (const r of this.running) if (r.numTokens - r.numComputedTokens === 1) numDecoding++;
    // the cap counts every decode token: each decoding request gets floor(cap / numDecoding) tokens, one of them its own
    const draftsPerRequest = draftCap === null ? Infinity : Math.max(0, Math.floor(draftCap / Math.max(1, numDecoding)) - 1);

    for (let i = 0; i < this.running.length && budget > 0; ) {
      const request = this.running[i]!;
      const numMissing = request.numTokens - request.numComputedTokens;
      // drafts ride along a decode step only (one token missing); the cap, the budget and max-model-len - 1 cut them
      const drafts = numMissing === 1 ? request.draftTokenIds.slice(0, draftsPerRequest) : NO_DRAFTS;
      const numNew = request.keepItemsWhole(request.numComputedTokens, capForPromptLogits(request, request.numComputedTokens,
        Math.min(numMissing + drafts.length, budget, this.config.maxModelLen - request.numComputedTokens - (drafts.length > 0 ? 1 : 0))), this.config.maxNumBatchedTokens);
      if (numNew <= 0) { i++; continue; }
      const numDrafts = Math.max(0, numNew - numMissing);
      let fits = false;
      while (true) {
        if (this.kv.allocateSlots(request, numNew) !== null) { fits = true; break; }
        const v = this.victimIndex();
        const victim = this.running.splice(v, 1)[0]!;
        if (v < i) i--;
        this.preempt(victim);
        numPreempted++;
        if (victim === request) break;
      }
      if (!fits) break; // the request itself was the newest: it went back to waiting
      chunks.push({ request, startPos: request.numComputedTokens, numNewTokens: numNew, draftTokenIds: numDrafts > 0 ? drafts.slice(0, numDrafts) : NO_DRAFTS });
      request.draftTokenIds = [];
      budget -= numNew;
      i++;
    }

    const loras = new Set<string>();
    if (this.config.maxLoras !== undefined) for (const r of this.running) if (r.loraName !== null) loras.add(r.loraName);
    if (numPreempted === 0) {
      for (let w = 0; w < this.waiting.length && budget > 0 && this.running.length < this.config.maxNumSeqs; ) {
        const request = this.waiting[w]!;
        if (request.grammarStatus === "compiling") { w++; continue; }
        // its adapter would be one more than --max-loras: deferred (vLLM's waiting reason for the LoRA budget)
        if (request.loraName !== null && !loras.has(request.loraName) && loras.size >= (this.config.maxLoras ?? 0)) { w++; numDeferred++; continue; }
        const computed = this.kv.getComputedBlocks(request);
        // another running request is computing this prompt's next block: wait for it instead of computing it twice
        if (this.kv.isNextBlockPending(request, computed)) { w++; numDeferred++; continue; }
        // its next blocks are in the offload tier: it waits for their load instead of computing them
        if (this.connector?.startLoad(request, computed)) { this.waiting.splice(w, 1); continue; }
        // its prompt is on another instance but there is no room to read it yet: it keeps its place
        if (this.connector?.mustWait?.(request)) break;
        const startPos = request.numComputedTokens + computed.numTokens;
        const numNew = request.keepItemsWhole(startPos, capForPromptLogits(request, startPos, Math.min(request.numTokens - startPos, budget)), this.config.maxNumBatchedTokens);
        // this step's prompt-logprob rows are spent: it starts next step, still first in line
        if (numNew <= 0) break;
        // no chunked prefill: the whole prompt next step, still first in line
        if (this.config.chunkedPrefill === false && numNew < request.numTokens - startPos) break;
        if (this.kv.allocateSlots(request, numNew, computed) === null) break;
        this.waiting.splice(w, 1);
        if (!request.prefixLookupDone) {
          this.kv.recordLookup(request, computed);
          this.connector?.recordAdmission(request, computed);
          if (request.numPreemptions === 0) request.numCachedTokens = computed.numTokens;
        }
        request.status = "running";
        if (request.loraName !== null) loras.add(request.loraName);
        request.times.scheduledMs ??= this.nowMs();
        this.running.push(request);
        chunks.push({ request, startPos: request.numComputedTokens, numNewTokens: numNew, draftTokenIds: NO_DRAFTS });
        budget -= numNew;
      }
    }
    return { chunks, numPreempted, numDeferred };
  }

  /** Removes a request from whichever queue holds it and frees its blocks at once (finish, or abort: `aborted`). */
  finish(request: RequestState, aborted = false): void {
    request.status = "finished";
    this.connector?.beforeFree(request, aborted);
    const r = this.running.indexOf(request);
    if (r >= 0) this.running.splice(r, 1);
    const w = this.waiting.indexOf(request);
    if (w >= 0) this.waiting.splice(w, 1);
    this.kv.free(request);
  }

  /** Preempts every running request, newest first (vLLM Scheduler.reset_prefix_cache with reset_running_requests):
   * their blocks go back to the pool and they are recomputed when scheduled again. */
  preemptAllRunning(): number {
    let count = 0;
    while (this.running.length > 0) { this.preempt(this.running.pop()!); count++; }
    return count;
  }

  private preempt(request: RequestState): void {
    this.connector?.beforeFree(request, false);
    this.kv.free(request);
    request.draftTokenIds = [];
    request.status = "waiting";
    request.numPreemptions++;
    if (this.config.schedulingPolicy === "priority") this.add(request);
    else this.waiting.unshift(request);
  }
}
