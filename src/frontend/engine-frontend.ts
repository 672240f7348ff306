/**
 * One engine's front end (vllm/v1/engine/async_llm.py: AsyncLLM.generate): the Orchestrator the server calls when
 * there is one stage. It starts the engine Worker (engine-client.ts), sends each request down as its child sequences
 * (parallel-sampling.ts), and turns every engine step into RequestOutputs on the main thread: detokenized text and
 * stop strings (output-processor.ts), TTFT / ITL and finished-request stats (iteration-stats.ts) for the listeners.
 * @example const frontend = await createEngineFrontend({ modelPath: null, engineArgs }); for await (const out of frontend.generate(req)) ...
 */
import { EngineClient, type EngineReadyInfo } from "./engine-client.ts";
import { SequenceOutputProcessor } from "./output-processor.ts";
import { packGrammarVocab, type EngineArgs, type KvHandoff, type PackedGrammarVocab, type PositionLogprobs, type RequestDelta, type RunnerSpec } from "../engine/protocol.ts";
import { DEFAULT_SAMPLING_PARAMS, validateSamplingParams, type SamplingParams } from "../engine/sampling-params.ts";
import type { ResolvedPooler } from "../engine/resolve-pooler.ts";
import type { FinishReason, RequestTimes, StepStats } from "../engine/stats.ts";
import { finishedRequestStats, IterationTracker, type StatsListener } from "./iteration-stats.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { nowMs } from "../util/clock.ts";
import { OutputQueue } from "./output-queue.ts";
import { childRequestIds, childSampling, ParentRequestCounter } from "./parallel-sampling.ts";
import { EngineDeadError, EngineRequestError, type CompletionOutput, type EncodeOutput, type EncodeRequest, type GenerateRequest, type Orchestrator, type RequestOutput } from "./orchestrator.ts";

export interface EngineFrontendOptions {
  /** GGUF path; null = the embedded default model */
  readonly modelPath: string | null;
  readonly engineArgs: EngineArgs;
  readonly listeners?: readonly StatsListener[];
  /** what the engine Worker runs (default: the model at modelPath on the kernel backend; tests pass a fake model) */
  readonly runner?: RunnerSpec;
  /** default: the tokenizer of the model file */
  readonly tokenizer?: Tokenizer;
  /** default: src/engine/worker.ts beside the engine client */
  readonly workerUrl?: URL | string;
  /** the model file's bytes in memory (sleep level 1): moved to the engine Worker, which reads them instead of the file */
  readonly hostModelBytes?: ArrayBuffer | null;
}

interface SequenceState {
  readonly sequenceId: string;
  readonly parent: ParentState;
  readonly processor: SequenceOutputProcessor;
  readonly sampling: SamplingParams;
  times: RequestTimes;
  numCachedTokens: number;
  finished: boolean;
}

interface ParentState {
  readonly request: GenerateRequest;
  readonly sequences: SequenceState[];
  readonly queue: OutputQueue<RequestOutput>;
  readonly counter: ParentRequestCounter;
  promptLogprobs: readonly (PositionLogprobs | null)[] | null;
  promptLogprobsSent: boolean;
  /** pd pipelines: the prompt's KV blocks, from the finishing delta */
  kv: KvHandoff | null;
  /** the engine's kv_transfer_params at finish (a prefill instance's answer for the decode instance) */
  kvTransferParams: Readonly<Record<string, unknown>> | null;
  done: boolean;
}

/** A pooling request in flight: settled once, by its embedding delta, its error, an abort or the engine's death. */
interface EncodeState {
  readonly request: EncodeRequest;
  readonly resolve: (output: EncodeOutput) => void;
  readonly reject: (error: Error) => void;
}

export class EngineFrontend implements Orchestrator {
  private client!: EngineClient;
  private readonly parents = new Map<string, ParentState>();
  private readonly encoding = new Map<string, EncodeState>();
  private readonly sequences = new Map<string, SequenceState>();
  private readonly tracker = new IterationTracker();
  private healthy = true;
  private fatalMessage: string | null = null;

  constructor(readonly tokenizer: Tokenizer, private readonly listeners: readonly StatsListener[]) {}

  get modelConfig(): ModelConfig {
    return this.client.ready.config;
  }

  get maxModelLen(): number {
    return this.client.ready.maxModelLen;
  }

  get pooler(): ResolvedPooler | null {
    return this.client.ready.pooler;
  }

  /** what the engine reported when its model was loaded (KV blocks, backend: vllm:cache_config_info) */
  get ready(): EngineReadyInfo {
    return this.client.ready;
  }

  /** Starts the engine Worker and waits until its model is loaded. */
  async start(options: EngineFrontendOptions): Promise<void> {
    const spec = {
      engineIndex: 0, engineArgs: options.engineArgs, runner: options.runner ?? { kind: "model" as const, modelPath: options.modelPath, ...(options.hostModelBytes ? { hostBytes: options.hostModelBytes } : {}) },
      // structured outputs: the engine's grammar thread builds xgrammar's TokenizerInfo from this
      grammarVocab: packedGrammarVocab(this.tokenizer),
    };
    const client = await EngineClient.start(spec, {
      onStep: (deltas, stats) => this.onStep(deltas, stats),
      onRequestError: (id, code, message) => this.onRequestError(id, code, message),
      onFatal: (message) => this.onFatal(message),
    }, options.workerUrl);
    this.client = client;
  }

  isHealthy(): boolean {
    return this.healthy && this.client.isAlive;
  }

  loadLora(name: string, path: string, loraIntId: number): Promise<string | null> {
    return this.client.loadLora(name, path, loraIntId);
  }

  unloadLora(name: string): Promise<string | null> {
    return this.client.unloadLora(name);
  }

  deathReason(): string | null {
    if (this.fatalMessage !== null) return this.fatalMessage;
    return this.isHealthy() ? null : "engine worker exited";
  }

  resetPrefixCache(resetRunningRequests: boolean): Promise<boolean> {
    return this.client.resetPrefixCache(resetRunningRequests);
  }

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    if (!this.isHealthy()) throw new EngineDeadError(`engine is dead: ${this.fatalMessage ?? "shut down"}`);
    const invalid = validateSamplingParams(request.sampling, { vocabSize: this.modelConfig.vocabSize });
    if (invalid) throw new EngineRequestError("invalid_sampling_params", invalid.message);
    const n = request.sampling.n;
    const sequenceIds = childRequestIds(request.requestId, n);
    if (this.parents.has(request.requestId) || sequenceIds.some((id) => this.sequences.has(id))) {
      throw new EngineRequestError("duplicate_request_id", `request id ${request.requestId} is already running`);
    }
    if (signal?.aborted) return;
    const parent: ParentState = {
      request, sequences: [], queue: new OutputQueue(), counter: new ParentRequestCounter(n), promptLogprobs: null, promptLogprobsSent: false,
      kv: null, kvTransferParams: null, done: false,
    };
    for (let index = 0; index < n; index++) {
      const sequenceId = sequenceIds[index]!;
      const sampling = childSampling(request.sampling, index);
      const seq: SequenceState = {
        sequenceId, parent, processor: new SequenceOutputProcessor(this.tokenizer, index, sampling), sampling,
        times: { arrivalMs: request.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null },
        numCachedTokens: 0, finished: false,
      };
      parent.sequences.push(seq);
      this.sequences.set(sequenceId, seq);
    }
    this.parents.set(request.requestId, parent);
    for (const seq of parent.sequences) {
      this.client.add({
        requestId: seq.sequenceId, promptTokenIds: request.promptTokenIds, sampling: seq.sampling, arrivalMs: request.arrivalMs, eosTokenIds: this.tokenizer.stopIds,
        ...(request.exportKv ? { exportKv: true } : {}), ...(request.importKv ? { importKv: request.importKv } : {}),
        ...(request.multimodal !== undefined && request.multimodal.length > 0 ? { multimodal: request.multimodal } : {}),
        ...(request.loraName !== undefined ? { loraName: request.loraName } : {}),
      });
    }
    const onAbort = (): void => this.abortParent(parent, true);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const output of parent.queue) yield output;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      // the consumer stopped early (break, throw, client gone): free the engine's blocks now
      if (!parent.done) this.abortParent(parent, true);
    }
  }

  /**
   * vLLM AsyncLLM.encode: one pooling request; its blocks are freed as soon as its prompt is pooled (or at an abort).
   */
  encode(request: EncodeRequest, signal?: AbortSignal): Promise<EncodeOutput> {
    if (!this.isHealthy()) return Promise.reject(new EngineDeadError(`engine is dead: ${this.fatalMessage ?? "shut down"}`));
    const id = request.requestId;
    if (this.encoding.has(id) || this.parents.has(id) || this.sequences.has(id)) {
      return Promise.reject(new EngineRequestError("duplicate_request_id", `request id ${id} is already running`));
    }
    if (signal?.aborted) return Promise.reject(new DOMException("the request was aborted", "AbortError"));
    return new Promise<EncodeOutput>((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.encoding.delete(id)) return;
        this.client.abort([id]);
        this.recordEncodeFinished(request, "abort", true, { arrivalMs: request.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null }, 0);
        reject(new DOMException("the request was aborted", "AbortError"));
      };
      const done = (): void => signal?.removeEventListener("abort", onAbort);
      this.encoding.set(id, {
        request,
        resolve: (output) => { done(); resolve(output); },
        reject: (error) => { done(); reject(error); },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.client.add({
        requestId: id, promptTokenIds: request.promptTokenIds, arrivalMs: request.arrivalMs, pooling: request.pooling,
        sampling: { ...DEFAULT_SAMPLING_PARAMS, maxTokens: null, priority: request.priority, cacheSalt: request.cacheSalt },
      });
    });
  }

  private recordEncodeFinished(request: EncodeRequest, finishReason: FinishReason, clientAborted: boolean, times: RequestTimes, numCachedTokens: number): void {
    const stats = finishedRequestStats({
      requestId: request.requestId, finishReason, clientAborted, numPromptTokens: request.promptTokenIds.length, numGenerationTokens: 0,
      numCachedTokens, maxTokensParam: null, n: 1, times, nowMs: nowMs(),
    });
    for (const l of this.listeners) l.onRequestFinished(stats);
  }

  /** the embedding deltas of this step: each settles its request */
  private settleEncodes(deltas: readonly RequestDelta[]): void {
    for (const d of deltas) {
      const state = d.embedding === undefined ? undefined : this.encoding.get(d.requestId);
      if (state === undefined) continue;
      this.encoding.delete(d.requestId);
      this.recordEncodeFinished(state.request, "stop", false, d.times, d.numCachedTokens);
      state.resolve({ requestId: state.request.requestId, embedding: d.embedding!, numPromptTokens: state.request.promptTokenIds.length, numCachedTokens: d.numCachedTokens, times: d.times });
    }
  }

  private failEncodes(error: Error): void {
    for (const [id, state] of [...this.encoding]) {
      this.encoding.delete(id);
      this.recordEncodeFinished(state.request, "error", false, { arrivalMs: state.request.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null }, 0);
      state.reject(error);
    }
  }

  async shutdown(): Promise<void> {
    this.healthy = false;
    this.fatalMessage ??= "shut down";
    for (const parent of [...this.parents.values()]) this.failParent(parent, new EngineDeadError("engine shut down"));
    this.failEncodes(new EngineDeadError("engine shut down"));
    await this.client.shutdown();
  }

  private onStep(deltas: readonly RequestDelta[], stats: StepStats): void {
    const iterationMs = nowMs();
    // outputs of sequences that already ended here (a stop string, then the engine ran one more step) count nowhere
    const live = deltas.filter((d) => this.sequences.get(d.requestId)?.finished === false);
    const stepStats = this.tracker.observeStep(stats, live, iterationMs);
    const changed = new Map<ParentState, CompletionOutput[]>();
    const finishedSeqs: SequenceState[] = [];
    for (const delta of live) {
      const seq = this.sequences.get(delta.requestId)!;
      const parent = seq.parent;
      seq.times = delta.times;
      seq.numCachedTokens = delta.numCachedTokens;
      if (delta.promptLogprobs && parent.promptLogprobs === null) parent.promptLogprobs = delta.promptLogprobs;
      if (delta.kv) parent.kv = delta.kv;
      if (delta.kvTransferParams) parent.kvTransferParams = delta.kvTransferParams;
      const { output, abortEngine } = seq.processor.process(delta);
      if (abortEngine) {
        this.client.abort([seq.sequenceId]);
        this.tracker.forget(seq.sequenceId);
      }
      let outputs = changed.get(parent);
      if (!outputs) changed.set(parent, (outputs = []));
      outputs.push(output);
      if (output.finishReason) {
        seq.finished = true;
        finishedSeqs.push(seq);
      }
    }
    for (const l of this.listeners) l.onStep(stepStats);
    if (this.encoding.size > 0) this.settleEncodes(deltas);
    for (const [parent, outputs] of changed) this.emit(parent, outputs);
    for (const seq of finishedSeqs) this.recordFinished(seq, seq.processor.finishReasonOr("stop"), false, iterationMs);
    for (const parent of changed.keys()) if (parent.sequences.every((s) => s.finished)) this.completeParent(parent);
  }

  private emit(parent: ParentState, outputs: CompletionOutput[]): void {
    const first = parent.sequences[0]!;
    let promptLogprobs: readonly (PositionLogprobs | null)[] | undefined;
    if (parent.promptLogprobs && !parent.promptLogprobsSent) {
      promptLogprobs = parent.promptLogprobs;
      parent.promptLogprobsSent = true;
    }
    parent.queue.push({
      requestId: parent.request.requestId, outputs, numPromptTokens: parent.request.promptTokenIds.length,
      numCachedTokens: first.numCachedTokens, ...(promptLogprobs ? { promptLogprobs } : {}), ...(parent.kv ? { kv: parent.kv } : {}),
      ...(parent.kvTransferParams ? { kvTransferParams: parent.kvTransferParams } : {}),
      finished: parent.sequences.every((s) => s.finished), times: first.times,
    });
  }

  private recordFinished(seq: SequenceState, finishReason: FinishReason, clientAborted: boolean, atMs: number): void {
    const p = seq.parent.request;
    const numGenerationTokens = seq.processor.numGeneratedTokens;
    const stats = finishedRequestStats({
      requestId: seq.sequenceId, finishReason, clientAborted, numPromptTokens: p.promptTokenIds.length,
      numGenerationTokens, numCachedTokens: seq.numCachedTokens,
      maxTokensParam: p.sampling.maxTokens, n: p.sampling.n, times: seq.times, nowMs: atMs,
      parent: seq.parent.counter.childFinished(numGenerationTokens, clientAborted),
    });
    for (const l of this.listeners) l.onRequestFinished(stats);
  }

  /** every sequence finished normally: end the stream, forget the request */
  private completeParent(parent: ParentState): void {
    parent.done = true;
    parent.queue.end();
    this.forgetParent(parent);
  }

  /** client gone: abort every unfinished sequence in the engine (blocks freed at once) and end the stream */
  private abortParent(parent: ParentState, clientAborted: boolean): void {
    if (parent.done) return;
    parent.done = true;
    const open = parent.sequences.filter((s) => !s.finished);
    this.client.abort(open.map((s) => s.sequenceId));
    const atMs = nowMs();
    for (const seq of open) {
      seq.finished = true;
      seq.processor.finish("abort");
      this.tracker.forget(seq.sequenceId);
      this.recordFinished(seq, "abort", clientAborted, atMs);
    }
    parent.queue.end();
    this.forgetParent(parent);
  }

  private failParent(parent: ParentState, error: Error): void {
    if (parent.done) return;
    parent.done = true;
    const open = parent.sequences.filter((s) => !s.finished);
    if (this.isHealthy()) this.client.abort(open.map((s) => s.sequenceId));
    const atMs = nowMs();
    for (const seq of open) {
      seq.finished = true;
      this.tracker.forget(seq.sequenceId);
      this.recordFinished(seq, "error", false, atMs);
    }
    parent.queue.fail(error);
    this.forgetParent(parent);
  }

  private forgetParent(parent: ParentState): void {
    this.parents.delete(parent.request.requestId);
    for (const s of parent.sequences) this.sequences.delete(s.sequenceId);
  }

  private onRequestError(sequenceId: string, code: string, message: string): void {
    const encode = this.encoding.get(sequenceId);
    if (encode !== undefined) {
      this.encoding.delete(sequenceId);
      this.recordEncodeFinished(encode.request, "error", false, { arrivalMs: encode.request.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null }, 0);
      encode.reject(new EngineRequestError(code, message));
      return;
    }
    const seq = this.sequences.get(sequenceId);
    if (seq) this.failParent(seq.parent, new EngineRequestError(code, message));
  }

  private onFatal(message: string): void {
    this.healthy = false;
    this.fatalMessage = message;
    for (const parent of [...this.parents.values()]) this.failParent(parent, new EngineDeadError(`engine is dead: ${message}`));
    this.failEncodes(new EngineDeadError(`engine is dead: ${message}`));
  }
}

/**
 * Each tokenizer's packed grammar vocabulary, built on its engine's first start: a model's later loads (its front end
 * kept, engine-frontend's tokenizer reused) send it again without rebuilding it; it goes with its tokenizer.
 */
const packedVocabs = new WeakMap<Tokenizer, PackedGrammarVocab | null>();

function packedGrammarVocab(tokenizer: Tokenizer): PackedGrammarVocab | null {
  let packed = packedVocabs.get(tokenizer);
  if (packed === undefined) {
    const vocab = tokenizer.grammarVocabulary?.() ?? null;
    packed = vocab === null ? null : packGrammarVocab(vocab);
    packedVocabs.set(tokenizer, packed);
  }
  return packed;
}

/** Builds the tokenizer (main thread: metadata only) and starts the engine. */
export async function createEngineFrontend(options: EngineFrontendOptions): Promise<EngineFrontend> {
  let tokenizer = options.tokenizer;
  if (!tokenizer) {
    const { openModelGguf } = await import("../gguf/model-source.ts");
    const { createTokenizer } = await import("../tokenizer/gguf-tokenizer.ts");
    const gguf = await openModelGguf(options.modelPath);
    if (!gguf.ok) throw new Error(gguf.error);
    tokenizer = createTokenizer(gguf.value);
  }
  const frontend = new EngineFrontend(tokenizer, options.listeners ?? []);
  await frontend.start(options);
  return frontend;
}
