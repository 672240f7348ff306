/**
 * The engine core (vLLM EngineCore, vllm/v1/engine/core.py): owns the scheduler, the KV cache manager, the KV
 * connectors and the model runner, and turns one `step()` into schedule -> execute_model -> update_from_output: one
 * batched forward pass, then each request's update (request-update.ts) into the step's deltas and stats. Runs inside
 * the engine Worker (worker.ts); tests drive it directly with a fake runner. Its dimensions come from engine-sizing.ts.
 */
import { NULL_BLOCK, type ModelBatch, type ModelRunner, type SequenceChunk } from "../model/model-batch.ts";
import type { EngineRequest, KvHandoff, RequestDelta } from "./protocol.ts";
import { checkMultimodal, chunkEmbeddings, chunkRopePositions } from "./multimodal-inputs.ts";
import type { StepStats } from "./stats.ts";
import { KvCacheManager } from "./kv-cache-manager.ts";
import { RequestState } from "./request.ts";
import { Scheduler, type ScheduledChunk } from "./scheduler.ts";
import { Sampler } from "./sampler.ts";
import { nowMs as clockNowMs } from "../util/clock.ts";
import { errorMessage } from "../util/error-message.ts";
import { createOffloadConnector, type KvOffloadConnector } from "./kv-connector/offload-connector.ts";
import { KvPeerConnector } from "./kv-connector/peer-connector.ts";
import { KvBlockTransfer } from "./kv-connector/block-transfer.ts";
import type { GrammarVocab } from "../grammar/grammar-protocol.ts";
import { SPEC_DECODE_UNSUPPORTED_PARAMS, specDecodeRefusesParams } from "./spec-decode/refused-params.ts";
import { NgramDraftProposer, type DraftProposer } from "./spec-decode/proposer.ts";
import { DraftModelProposer } from "./spec-decode/draft-model-proposer.ts";
import { SequencePooler } from "./pooler.ts";
import { SuffixDecodingProposer } from "./spec-decode/suffix-proposer.ts";
import { maxStepShape, type EngineConfig } from "./engine-sizing.ts";
import { GrammarBookkeeping } from "./grammar-bookkeeping.ts";
import { BlockHasher, noneHash, type PrefixCachingHashAlgo } from "../kv-events/block-hash.ts";
import { KvEventQueue } from "../kv-events/kv-event-queue.ts";
import type { KvCacheEvent } from "../kv-events/kv-events.ts";
import { LoraManager } from "../lora/lora-manager.ts";
import { staticLoraIntId, type LoraConfig } from "../config/lora-config.ts";
import { newStepTally, updateRequest, type RequestUpdateContext, type StepModelOutput, type StepTally } from "./request-update.ts";

export interface RequestErrorInfo {
  readonly code: string;
  readonly message: string;
}

/** Optional parts of an engine: structured outputs need the model's vocabulary (sent by the main thread). */
export interface EngineOptions {
  /** VLLM_LOGGING_LEVEL=DEBUG: collect DEBUG lines (grammar compile times) into the step stats */
  readonly debugLog?: boolean;
  readonly grammarVocab?: GrammarVocab | null;
  /** compiled grammars kept for reuse */
  readonly grammarCacheSize?: number;
  /** the grammar thread's entry (tests); default: grammar/grammar-worker.ts */
  readonly grammarWorkerUrl?: string;
  /** something finished outside a step (a grammar compiled or failed): the loop should look again */
  readonly onWake?: () => void;
  /** speculative decoding's drafter when it is not the ngram one; default from config.speculative */
  readonly proposer?: DraftProposer | null;
  /** method draft_model: the loaded draft (its KV cache gets the engine's block ids) */
  readonly draftRunner?: ModelRunner | null;
  /** the prefix-cache block hashes (--prefix-caching-hash-algo, PYTHONHASHSEED); default: sha256, unseeded */
  readonly blockHashing?: { readonly algo: PrefixCachingHashAlgo; readonly seed: string | null };
  /** KV cache events on (--kv-events-config): `intHashes` is VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES; absent/null: off */
  readonly kvEvents?: { readonly intHashes: boolean } | null;
  /** --enable-lora: the limits and the --lora-modules read at start-up (a bad one throws its one line); absent/null: off */
  readonly lora?: LoraConfig | null;
}

/** A request that failed after it was accepted (its grammar would not compile, or its grammar reached a dead end). */
export interface LateRequestError extends RequestErrorInfo {
  readonly requestId: string;
}

const DEFAULT_GRAMMAR_CACHE_SIZE = 128;

type ScheduledStep = Awaited<ReturnType<Scheduler["schedule"]>>;

export interface EngineStepResult {
  readonly deltas: readonly RequestDelta[];
  readonly stats: StepStats;
}

export class EngineCore {
  readonly config: EngineConfig;
  readonly kv: KvCacheManager;
  readonly scheduler: Scheduler;
  /** the offload tier (null without one) */
  readonly offload: KvOffloadConnector | null;
  /** the connector between instances (null without one) */
  readonly peer: KvPeerConnector | null;
  private readonly requests = new Map<string, RequestState>();
  private batchId = 0;
  private readonly sampler = new Sampler();
  /** seeds requests without a seed, so a whole engine run is reproducible from one number */
  private nextFallbackSeed: number;
  /** structured outputs: grammars, their bitmasks and the drafts they accept */
  private readonly grammar: GrammarBookkeeping;
  private readonly lateErrors: LateRequestError[] = [];
  /** speculative decoding: who drafts (null: off) */
  private readonly proposer: DraftProposer | null;
  /** what the per-request update works on */
  private readonly updateContext: RequestUpdateContext;
  /** vLLM's block hashing, one NONE_HASH per engine (init_none_hash) */
  private readonly hasher: BlockHasher;
  /** the KV events of the current step (null: events off) */
  private readonly kvEvents: KvEventQueue | null;
  /** the LoRA adapters (--enable-lora), or null */
  private readonly lora: LoraManager | null;

  constructor(
    private readonly runner: ModelRunner,
    config: EngineConfig,
    private readonly engineIndex = 0,
    private readonly nowMs: () => number = clockNowMs,
    seed = Date.now(),
    private readonly options: EngineOptions = {},
  ) {
    this.config = config;
    const hashing = options.blockHashing ?? { algo: "sha256", seed: null };
    this.hasher = new BlockHasher(hashing.algo, noneHash(hashing.algo, hashing.seed));
    // KVCacheManager.take_events: a group's spec kind from its sliding window
    this.kvEvents = options.kvEvents
      ? new KvEventQueue(options.kvEvents.intHashes, (config.kvCacheGroups?.groups ?? [{ slidingWindow: 0 }]).map((g) => (
        g.slidingWindow > 0 ? { kind: "sliding_window", slidingWindow: g.slidingWindow } : { kind: "full_attention", slidingWindow: null })))
      : null;
    this.kv = new KvCacheManager(config, this.kvEvents);
    this.nextFallbackSeed = seed;
    this.grammar = new GrammarBookkeeping(options.grammarVocab
      ? {
        vocab: options.grammarVocab, vocabSize: runner.config.vocabSize, cacheSize: options.grammarCacheSize ?? DEFAULT_GRAMMAR_CACHE_SIZE,
        ...(options.grammarWorkerUrl ? { workerUrl: options.grammarWorkerUrl } : {}),
        isLive: (state) => this.requests.get(state.requestId) === state,
        failLate: (requestId, code, message) => this.failLate(requestId, code, message),
        onWake: () => this.options.onWake?.(),
        ...(options.debugLog === true ? { onCompiled: (requestId: string, compileMs: number, cached: boolean) => void this.debugLines.push(`Request ${requestId}: grammar ${cached ? "taken from the compiled-grammar cache" : "compiled"} in ${compileMs.toFixed(1)} ms`) } : {}),
      }
      : null);
    const spec = config.speculative ?? null;
    this.proposer = options.proposer
      ?? (spec?.method === "ngram" ? new NgramDraftProposer(spec) : null)
      ?? (spec?.method === "suffix" ? new SuffixDecodingProposer(spec) : null)
      ?? (spec?.method === "draft_model" && options.draftRunner
        ? new DraftModelProposer(options.draftRunner, spec, config.numBlocks, config.blockSize,
          (req, numPositions) => numPositions <= req.blockIds.length * config.blockSize || this.kv.allocateSlots(req, numPositions - req.numComputedTokens) !== null)
        : null);
    if (spec !== null && this.proposer === null) throw new Error(`speculative method ${spec.method} needs its proposer passed to the engine`);
    if (config.kvCacheGroups !== undefined) runner.allocateKvCache(config.numBlocks, config.blockSize, config.kvCacheGroups);
    else runner.allocateKvCache(config.numBlocks, config.blockSize);
    // every buffer a step can need, now: a request that needs more than start-up reserved cannot exist
    const shape = maxStepShape(config);
    runner.reserveActivations?.(shape.numTokens, shape.numLogitRows);
    this.offload = config.kvOffload ? createOffloadConnector(config.kvOffload, this.kv, runner, config, nowMs, engineIndex, this.kvEvents) : null;
    this.peer = config.kvPeer
      ? new KvPeerConnector({
        config: config.kvPeer, kv: this.kv, transfer: new KvBlockTransfer(runner, config.blockSize), descriptorsPerBlock: runner.config.numLayers * 2,
        engineIndex, nowMs, onWake: () => this.options.onWake?.(),
      })
      : null;
    this.lora = options.lora ? new LoraManager(options.lora, runner.config, runner) : null;
    for (const [i, m] of (options.lora?.modules ?? []).entries()) {
      const read = this.lora!.register(m.name, m.path, staticLoraIntId(i));
      if (!read.ok) throw new Error(`--lora-modules ${m.name}: ${read.error}`);
    }
    this.scheduler = new Scheduler(options.lora ? { ...config, maxLoras: options.lora.maxLoras } : config, this.kv, nowMs, this.offload ?? this.peer);
    const peer = this.peer;
    this.updateContext = {
      kv: this.kv, sampler: this.sampler, grammar: this.grammar, maxModelLen: config.maxModelLen, drafting: this.proposer !== null, runner,
      exportKv: (req) => this.exportKv(req),
      ...(peer !== null ? { peerFinished: (req, reason) => peer.requestFinished(req, reason) } : {}),
      retire: (req) => {
        this.requests.delete(req.requestId);
        this.scheduler.finish(req);
      },
      forget: (req) => {
        if (req.grammarStatus !== "none") this.grammar.free([req.requestId]);
        this.proposer?.forget?.(req);
      },
    };
  }

  /** Releases the offload tier (unlinks its disk file) and the grammar thread; the engine takes no requests afterwards. */
  dispose(): void {
    this.offload?.close();
    this.peer?.close();
    this.grammar.dispose();
    this.proposer?.dispose?.();
  }

  get numRunning(): number { return this.scheduler.running.length; }
  /** waiting requests, with those waiting for an offload load (vLLM keeps them in its waiting queue, "deferred") */
  get numWaiting(): number { return this.scheduler.waiting.length + (this.offload?.numLoading ?? 0) + (this.peer?.numLoading ?? 0); }
  hasWork(): boolean { return this.scheduler.numUnfinished > 0 || (this.peer?.hasPendingWork() ?? false); }
  /** requests whose grammar is compiling (they wait in the queue) */
  get numCompilingGrammars(): number { return this.grammar.numCompilingGrammars; }

  /**
   * Forgets every cached prefix (vLLM EngineCore.reset_prefix_cache -> Scheduler.reset_prefix_cache -> BlockPool):
   * false while a request holds blocks, unless `resetRunningRequests` preempts the running ones first (they are
   * recomputed). Emits AllBlocksCleared when it succeeds.
   */
  resetPrefixCache(resetRunningRequests: boolean): boolean {
    if (resetRunningRequests) this.scheduler.preemptAllRunning();
    if (this.kv.pool.numFreeBlocks !== this.kv.pool.numBlocks) return false;
    this.kv.pool.resetPrefixCache();
    return true;
  }

  /** The KV cache events since the last call, oldest first (vLLM Scheduler: take_events once per step); empty when off. */
  takeKvEvents(): KvCacheEvent[] {
    return this.kvEvents?.take() ?? [];
  }

  /** Queues a request, or says why it can never run (vLLM's messages). */
  addRequest(request: EngineRequest): RequestErrorInfo | null {
    const refused = this.admit(request);
    // a decode request refused here: the prefill instance need not hold its blocks for the lease (vLLM notifies the
    // connector of requests the serving layer rejects)
    if (refused !== null && this.peer !== null && request.sampling.kvTransferParams) this.peer.rejected(request.sampling.kvTransferParams);
    return refused;
  }

  private admit(request: EngineRequest): RequestErrorInfo | null {
    const { maxModelLen, numBlocks } = this.config;
    const numPrompt = request.promptTokenIds.length;
    if (this.requests.has(request.requestId)) return { code: "duplicate_request_id", message: `request id ${request.requestId} is already running` };
    if (numPrompt === 0) return { code: "empty_prompt", message: "The decoder prompt cannot be empty" };
    if (request.loraName !== undefined) {
      if (this.lora === null) return { code: "lora_disabled", message: "LoRA is not enabled: start the server with --enable-lora" };
      if (!this.lora.has(request.loraName)) return { code: "lora_not_found", message: `The model \`${request.loraName}\` does not exist.` };
    }
    if (this.proposer !== null && specDecodeRefusesParams(request.sampling)) return { code: "invalid_sampling_params", message: SPEC_DECODE_UNSUPPORTED_PARAMS };
    const vocabSize = this.runner.config.vocabSize;
    const badId = request.promptTokenIds.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
    if (badId !== undefined) return { code: "invalid_token_id", message: `prompt token id ${badId} is out of vocabulary range [0, ${vocabSize})` };
    if (numPrompt >= maxModelLen && !request.pooling) {
      return { code: "context_length", message: `The decoder prompt (length ${numPrompt}) is longer than the maximum model length of ${maxModelLen}. Make sure that \`max_model_len\` is no smaller than the number of text tokens.` };
    }
    const pooler = this.config.pooler ?? null;
    // vLLM api_server.py: a route whose task the model lacks answers "The model does not support ... API"
    if (pooler !== null && !request.pooling) return { code: "pooling_model", message: "The model does not support Completions API: it is an embedding model (use /v1/embeddings)" };
    if (pooler === null && request.pooling) return { code: "generative_model", message: "The model does not support Embeddings API" };
    if (request.pooling && numPrompt > maxModelLen) {
      return { code: "context_length", message: `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${numPrompt} tokens in the input for embedding generation. Please reduce the length of the input.` };
    }
    const mmRefused = checkMultimodal(request, this.runner.config.dim, this.runner.config.ropeSections !== undefined);
    if (mmRefused !== null) return mmRefused;
    const state = new RequestState(request, maxModelLen, this.nowMs(), this.nextFallbackSeed++, this.hasher);
    if (request.loraName !== undefined) state.loraIntId = this.lora!.idOf(request.loraName);
    if (pooler !== null) state.pooler = new SequencePooler(pooler.poolingType, pooler.hiddenSize);
    const blocksNeeded = this.kv.maxBlocksFor(numPrompt + state.maxOutputTokens);
    if (blocksNeeded > numBlocks) {
      return { code: "kv_cache_too_small", message: `request needs ${blocksNeeded} KV blocks (${numPrompt} prompt + ${state.maxOutputTokens} output tokens) but the cache has ${numBlocks}; raise --kv-cache-memory or lower max_tokens` };
    }
    // the field text of vLLM's protocol.py: a priority is an error unless the server schedules by priority
    if (request.sampling.priority !== 0 && this.config.schedulingPolicy !== "priority") {
      return { code: "invalid_priority", message: "Priority scheduling is not enabled: start the server with --scheduling-policy priority to use the priority field (or send priority 0)." };
    }
    const spec = request.sampling.structuredOutputs;
    if (spec && !this.options.grammarVocab) {
      return { code: "structured_outputs_unavailable", message: "Structured outputs need the model's tokenizer vocabulary, which this engine was not given." };
    }
    if (request.importKv) {
      const imported = this.importKv(state, request.importKv);
      if (imported) return imported;
    }
    const transferParams = request.sampling.kvTransferParams ?? null;
    if (transferParams !== null) {
      if (this.peer === null) {
        return { code: "kv_transfer_params_unsupported", message: 'kv_transfer_params needs a KV connector between instances: start the server with --kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\' (or kv_producer / kv_consumer)' };
      }
      const refused = this.peer.prepare(state, transferParams);
      if (refused) return refused;
    }
    this.requests.set(request.requestId, state);
    this.scheduler.add(state);
    if (spec) this.grammar.start(state, spec);
    this.peer?.wakeWaiter();
    return null;
  }

  /** Resolves when a grammar compile settles (immediately when none is in flight). */
  waitForGrammar(): Promise<void> {
    return this.grammar.waitForCompiles();
  }

  /** Errors of requests that failed after they were accepted, since the last call. */
  takeLateErrors(): LateRequestError[] {
    return this.lateErrors.splice(0);
  }

  private failLate(requestId: string, code: string, message: string): void {
    const state = this.requests.get(requestId);
    if (!state) return;
    this.lateErrors.push({ requestId, code, message });
    this.requests.delete(requestId);
    this.scheduler.finish(state);
    this.proposer?.forget?.(state);
    this.grammar.free([requestId]);
  }

  /**
   * pd pipelines: the first `kv.numTokens` positions arrive computed from a prefill stage. They get blocks at once and
   * the request waits holding them; a later preemption simply recomputes them.
   */
  private importKv(state: RequestState, kv: KvHandoff): RequestErrorInfo | null {
    const { blockSize } = this.config;
    if (kv.blockSize !== blockSize) return { code: "kv_handoff", message: `KV handoff has block size ${kv.blockSize}, this engine uses ${blockSize}` };
    if (!Number.isInteger(kv.numTokens) || kv.numTokens < 1 || kv.numTokens >= state.numPromptTokens) {
      return { code: "kv_handoff", message: `KV handoff covers ${kv.numTokens} positions; it must cover 1 to ${state.numPromptTokens - 1} of the ${state.numPromptTokens} prompt tokens` };
    }
    const newIds = this.kv.allocateSlots(state, kv.numTokens);
    if (newIds === null) return { code: "kv_cache_full", message: `no free KV blocks for a handoff of ${kv.numTokens} positions` };
    try {
      // every group's blocks, group after group (exportKv's order); a sliding group's are freed at its next allocation
      this.runner.importKvBlocks(Int32Array.from(newIds.flat()), kv.data);
    } catch (e) {
      this.kv.free(state);
      return { code: "kv_handoff", message: `KV handoff rejected by the model runner: ${errorMessage(e)}` };
    }
    state.numComputedTokens = kv.numTokens;
    state.numImportedTokens = kv.numTokens;
    this.kv.cacheFullBlocks(state);
    return null;
  }

  /** the prompt's computed positions as a handoff, for the next stage */
  private exportKv(req: RequestState): KvHandoff {
    const numTokens = Math.min(req.numComputedTokens, req.numPromptTokens);
    // group after group; a sliding group's freed entries go out as block 0 (behind every window: never read)
    const blockIds = Int32Array.from(this.kv.tables(req).flatMap((t) => t.slice(0, this.kv.blocksFor(numTokens))), (id) => (id === NULL_BLOCK ? 0 : id));
    return { numTokens, blockSize: this.config.blockSize, data: this.runner.exportKvBlocks(blockIds) };
  }

  /** Drops requests at once (client gone, stop string): their blocks are free when this returns. */
  abort(requestIds: readonly string[]): void {
    for (const id of requestIds) {
      const state = this.requests.get(id);
      if (!state) continue;
      this.requests.delete(id);
      this.scheduler.finish(state, true);
      this.proposer?.forget?.(state);
    }
    this.grammar.free(requestIds);
  }

  /**
   * Scheduler gauges without a step (vLLM sends SchedulerStats with every output batch, even an empty one): after an
   * abort leaves the engine idle, this is how running / waiting / KV usage reach 0 on the metrics side.
   * batchSize 0 marks it: no batch ran, no tokens were computed.
   */
  /** DEBUG lines waiting for the next stats (VLLM_LOGGING_LEVEL=DEBUG only) */
  private readonly debugLines: string[] = [];

  idleStats(): StepStats {
    const t = this.nowMs();
    const counts = this.kv.takeCounts();
    return {
      engineIndex: this.engineIndex, batchId: this.batchId, stepStartMs: t, stepEndMs: t, batchSize: 0, numPromptTokens: 0,
      numGenerationTokens: 0, numPreempted: 0, numRunning: this.numRunning, numWaiting: this.numWaiting, numWaitingDeferred: 0,
      kvCacheUsage: this.kv.usage(), prefixCacheQueries: counts.queries, prefixCacheHits: counts.hits,
      ...(this.offload ? { kvOffload: this.offload.takeStats() } : {}),
      ...(this.peer ? { kvPeer: this.peer.takeStats() } : {}),
      ...this.loraStats(),
      ...this.takeDebugLines(),
    };
  }

  /**
   * Schedules a step: the offload tier settles its transfers first; when nothing can run but offload loads are in
   * flight, waits for them (an abort can still land meanwhile).
   */
  private async scheduleStep(): Promise<ReturnType<Scheduler["schedule"]>> {
    const connector = this.offload ?? this.peer;
    for (;;) {
      connector?.drain([...this.scheduler.running, ...this.scheduler.waiting]);
      // a read from the prefill instance failed under kv_load_failure_policy "fail": the request ends (HTTP 500)
      if (this.peer) for (const f of this.peer.takeFailed()) this.failLate(f.request.requestId, "kv_load_failed", f.message);
      const out = this.scheduler.schedule();
      if (out.chunks.length > 0 || connector === null || !connector.hasPendingLoads()) return out;
      await connector.waitForProgress();
    }
  }

  /**
   * One engine step (vLLM EngineCore.step): schedule -> execute_model -> update_from_output, then the drafts of the
   * requests that go on (vLLM propose_draft_token_ids); null when nothing could be scheduled.
   */
  async step(): Promise<EngineStepResult | null> {
    const stepStartMs = this.nowMs();
    const scheduled = await this.scheduleStep();
    const { chunks } = scheduled;
    // an idle engine still reports what its connector counted (an expired lease, a read notification that failed)
    if (chunks.length === 0) return this.peer?.hasStatsToReport() ? { deltas: [], stats: this.idleStats() } : null;
    const loraSlots = this.assignLoraSlots(chunks);
    if (loraSlots.failed.size > 0) return this.step();
    const batchId = ++this.batchId;
    const output = await this.executeModel(chunks, loraSlots.slots);
    const tally = newStepTally(this.config.speculative ?? null);
    chunks.forEach((chunk, i) => updateRequest(this.updateContext, chunk, i, output, tally));
    if (this.proposer !== null && tally.toDraft.length > 0) {
      await this.proposer.propose(tally.toDraft, this.config.maxModelLen);
      await this.grammar.validateDrafts(tally.toDraft);
    }
    this.offload?.afterStep(chunks.map((c) => c.request));
    return { deltas: tally.deltas, stats: this.stepStats(scheduled, tally, batchId, stepStartMs, output.stepEndMs) };
  }

  /**
   * The batched forward pass (vLLM execute_model). Grammar requests that sample this step get their bitmasks (one per
   * draft position and one after the drafts) filled on the grammar thread meanwhile (vLLM grammar_bitmask).
   */
  private async executeModel(chunks: readonly ScheduledChunk[], loraSlots: ReadonlyMap<string, number>): Promise<StepModelOutput> {
    const pooling = (this.config.pooler ?? null) !== null;
    const batch: ModelBatch = { sequences: chunks.map((c) => this.toSequenceChunk(c, loraSlots)), ...(pooling ? { hiddenStates: true } : {}) };
    const plan = this.grammar.plan(chunks);
    const [result, fill] = await Promise.all([this.runner.execute(batch), this.grammar.fill(plan.fillRequests)]);
    const row = new Map<string, number>(plan.fillRequests.map((f, r) => [f.requestId, r]));
    const stepEndMs = this.nowMs();
    // pooling engines: the first hidden-state row of each chunk ([numTokens, dim] in batch order)
    const tokenRowStart: number[] = [];
    chunks.reduce((r, c) => (tokenRowStart.push(r), r + c.numNewTokens), 0);
    return { batch, result, grammar: { from: plan.from, fill, row }, tokenRowStart, vocabSize: this.runner.config.vocabSize, stepEndMs };
  }

  /**
   * The kernels' slot of every adapter this step uses, uploading what is missing; a request whose adapter cannot be
   * read any more (its file went away after host memory dropped it) fails with that line and the step is scheduled again.
   */
  private assignLoraSlots(chunks: readonly ScheduledChunk[]): { slots: ReadonlyMap<string, number>; failed: ReadonlySet<string> } {
    const names = new Set<string>();
    for (const c of chunks) if (c.request.loraName !== null) names.add(c.request.loraName);
    if (this.lora === null || names.size === 0) return { slots: new Map(), failed: new Set() };
    const slots = this.lora.slotsFor(names);
    if (slots.ok) return { slots: slots.value, failed: new Set() };
    const failed = new Set<string>();
    for (const c of chunks) {
      if (c.request.loraName === null) continue;
      failed.add(c.request.requestId);
      this.failLate(c.request.requestId, "lora_load_failed", slots.error);
    }
    return { slots: new Map(), failed };
  }

  /** LoRA's entry of the stats: the adapters running and waiting (each once) */
  private loraStats(): { lora?: StepStats["lora"] } {
    if (this.lora === null) return {};
    const names = (rs: readonly RequestState[]) => [...new Set(rs.flatMap((r) => (r.loraName === null ? [] : [r.loraName])))];
    return { lora: { maxLoras: this.lora.config.maxLoras, running: names(this.scheduler.running), waiting: names(this.scheduler.waiting) } };
  }

  /** Registers (reads and checks) an adapter under `name` and its lora_int_id, or forgets one: null, or the one-line reason. */
  loadLora(name: string, path: string, loraIntId: number): string | null {
    if (this.lora === null) return "LoRA is not enabled: start the server with --enable-lora";
    const read = this.lora.register(name, path, loraIntId);
    return read.ok ? null : read.error;
  }

  unloadLora(name: string): string | null {
    if (this.lora === null) return "LoRA is not enabled: start the server with --enable-lora";
    return this.lora.unregister(name) ? null : `The lora adapter '${name}' cannot be found.`;
  }

  /** The step's stats record (vLLM SchedulerStats with the step's counts), after the connectors settled the step. */
  private stepStats(scheduled: ScheduledStep, tally: StepTally, batchId: number, stepStartMs: number, stepEndMs: number): StepStats {
    const counts = this.kv.takeCounts();
    return {
      engineIndex: this.engineIndex, batchId, stepStartMs, stepEndMs, batchSize: scheduled.chunks.length, numPromptTokens: tally.numPromptTokens,
      numGenerationTokens: tally.numGenerationTokens, numPreempted: scheduled.numPreempted, numRunning: this.numRunning, numWaiting: this.numWaiting,
      numWaitingDeferred: Math.min(scheduled.numDeferred + (this.offload?.numLoading ?? 0) + (this.peer?.numLoading ?? 0), this.numWaiting),
      kvCacheUsage: this.kv.usage(), prefixCacheQueries: counts.queries, prefixCacheHits: counts.hits,
      ...(this.offload ? { kvOffload: this.offload.takeStats() } : {}),
      ...(this.peer ? { kvPeer: this.peer.takeStats() } : {}),
      ...(tally.specStats !== null ? { specDecoding: tally.specStats } : {}),
      ...(tally.numExternalKvTokens > 0 ? { numExternalKvTokens: tally.numExternalKvTokens } : {}),
      ...this.takeDebugLines(),
      ...this.loraStats(),
    };
  }

  /** the DEBUG lines gathered since the last stats, for the main thread's log (VLLM_LOGGING_LEVEL=DEBUG) */
  private takeDebugLines(): { debugLines?: readonly string[] } {
    return this.debugLines.length > 0 ? { debugLines: this.debugLines.splice(0) } : {};
  }

  private toSequenceChunk(c: ScheduledChunk, loraSlots: ReadonlyMap<string, number>): SequenceChunk {
    const req = c.request;
    const end = c.startPos + c.numNewTokens;
    const needPromptLogprobs = req.promptLogprobs !== null && !req.promptLogprobsSent && c.startPos < req.numPromptTokens - 1;
    const numDrafts = c.draftTokenIds.length;
    const tokenIds = new Int32Array(c.numNewTokens); // [numNewTokens] real tokens, then the drafts to verify
    tokenIds.set(req.allTokenIds.slice(c.startPos, end - numDrafts));
    tokenIds.set(c.draftTokenIds, c.numNewTokens - numDrafts);
    return {
      tokenIds,
      startPos: c.startPos,
      blockTable: Int32Array.from(req.blockIds), // [ceil(end / blockSize)]
      ...(req.blockTables.length > 1 ? { blockTables: req.blockTables.map((t) => Int32Array.from(t)) } : {}),
      // drafts: a row at the last real token and at every draft (the target's prediction after each)
      // pooling requests read hidden states (ModelBatch.hiddenStates), never logits
      logits: req.pooling !== null ? "none" : needPromptLogprobs || numDrafts > 0 ? "all" : end === req.numTokens ? "last" : "none",
      ...(req.multimodal.length > 0 ? { inputEmbeddings: chunkEmbeddings(req.multimodal, c.startPos, end, this.runner.config.dim), ...chunkRopePositions(req.multimodal, c.startPos, end) } : {}),
      ...(req.loraName !== null ? { loraSlot: loraSlots.get(req.loraName) } : {}),
    };
  }
}
