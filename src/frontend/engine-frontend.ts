/**
 * The orchestrator (the server's one door to generation): routes each request through a pipeline of stages, each
 * stage an engine in its own Worker, and turns engine steps into RequestOutputs on the main thread (output
 * processing, stop strings, stats). The default pipeline is one stage; stages are a list and the seam for edges
 * (kv-handoff, text-handoff: the observability helper's) is `StageEdge`, recorded per request as TransferEdgeStats.
 *
 * n > 1 is split here into child sequences `${index}_${requestId}` (vLLM ParentRequest); children share the prompt's
 * KV blocks through the prefix cache.
 * @example const orch = await createEngineFrontend({ modelPath: null, engineArgs }); for await (const out of orch.generate(req)) ...
 */
import { EngineClient } from "./engine-client.ts";
import { SequenceOutputProcessor } from "./output-processor.ts";
import type { EngineArgs, KvHandoff, PositionLogprobs, RequestDelta, RunnerSpec } from "../engine/protocol.ts";
import { validateSamplingParams, type SamplingParams } from "../engine/sampling-params.ts";
import type { FinishReason, RequestTimes, StageRequestStats, StatsListener, StepStats, TransferEdgeStats } from "../engine/stats.ts";
import { finishedRequestStats, IterationTracker } from "./iteration-stats.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { nowMs } from "../util/clock.ts";
import { OutputQueue } from "./output-queue.ts";
import { EngineDeadError, EngineRequestError, type CompletionOutput, type GenerateRequest, type Orchestrator, type RequestOutput } from "./orchestrator.ts";

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
}

/** A stage of the pipeline: one engine in its own Worker. */
export interface PipelineStage {
  readonly stageId: number;
  readonly client: EngineClient;
}

/** Passes a request's output from one stage to the next; measures tx / in-flight / rx-decode (omni §3.5). */
export interface StageEdge {
  readonly fromStage: number;
  readonly toStage: number;
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
  /** per stage: when the orchestrator submitted the request to it */
  readonly stageSubmitMs: number[];
  promptLogprobs: readonly (PositionLogprobs | null)[] | null;
  promptLogprobsSent: boolean;
  /** pd pipelines: the prompt's KV blocks, from the finishing delta */
  kv: KvHandoff | null;
  /** the engine step that last carried output for this request */
  lastBatchId: number;
  lastBatchSize: number;
  done: boolean;
}

class EngineFrontend implements Orchestrator {
  readonly stages: PipelineStage[] = [];
  readonly edges: StageEdge[] = [];
  private readonly parents = new Map<string, ParentState>();
  private readonly sequences = new Map<string, SequenceState>();
  private readonly tracker = new IterationTracker();
  private healthy = true;
  private fatalMessage: string | null = null;

  constructor(readonly tokenizer: Tokenizer, private readonly listeners: readonly StatsListener[]) {}

  get modelConfig(): ModelConfig {
    return this.lastStage.client.ready.config;
  }

  get maxModelLen(): number {
    return this.stages[0]!.client.ready.maxModelLen;
  }

  /** Starts stage 0's engine (the single-stage pipeline). */
  async start(options: EngineFrontendOptions): Promise<void> {
    const spec = {
      engineIndex: 0, engineArgs: options.engineArgs, runner: options.runner ?? { kind: "model" as const, modelPath: options.modelPath },
      // structured outputs: the engine's grammar thread builds xgrammar's TokenizerInfo from this
      grammarVocab: this.tokenizer.grammarVocabulary?.() ?? null,
    };
    const client = await EngineClient.start(spec, {
      onStep: (deltas, stats) => this.onStep(deltas, stats),
      onRequestError: (id, code, message) => this.onRequestError(id, code, message),
      onFatal: (message) => this.onFatal(message),
    }, options.workerUrl);
    this.stages.push({ stageId: 0, client });
  }

  isHealthy(): boolean {
    return this.healthy && this.stages.every((s) => s.client.isAlive);
  }

  deathReason(): string | null {
    if (this.fatalMessage !== null) return this.fatalMessage;
    return this.isHealthy() ? null : "engine worker exited";
  }

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    if (!this.isHealthy()) throw new EngineDeadError(`engine is dead: ${this.fatalMessage ?? "shut down"}`);
    const invalid = validateSamplingParams(request.sampling, { vocabSize: this.modelConfig.vocabSize });
    if (invalid) throw new EngineRequestError("invalid_sampling_params", invalid.message);
    const n = request.sampling.n;
    const sequenceIds = Array.from({ length: n }, (_, index) => (n === 1 ? request.requestId : `${index}_${request.requestId}`));
    if (this.parents.has(request.requestId) || sequenceIds.some((id) => this.sequences.has(id))) {
      throw new EngineRequestError("duplicate_request_id", `request id ${request.requestId} is already running`);
    }
    if (signal?.aborted) return;
    const parent: ParentState = {
      request, sequences: [], queue: new OutputQueue(), stageSubmitMs: [], promptLogprobs: null, promptLogprobsSent: false, kv: null,
      lastBatchId: 0, lastBatchSize: 0, done: false,
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
    const stage = this.stages[0]!;
    parent.stageSubmitMs[stage.stageId] = nowMs();
    for (const seq of parent.sequences) {
      stage.client.add({
        requestId: seq.sequenceId, promptTokenIds: request.promptTokenIds, sampling: seq.sampling, arrivalMs: request.arrivalMs, eosTokenIds: this.tokenizer.stopIds,
        ...(request.exportKv ? { exportKv: true } : {}), ...(request.importKv ? { importKv: request.importKv } : {}),
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

  async shutdown(): Promise<void> {
    this.healthy = false;
    this.fatalMessage ??= "shut down";
    for (const parent of [...this.parents.values()]) this.failParent(parent, new EngineDeadError("engine shut down"));
    await Promise.all(this.stages.map((s) => s.client.shutdown()));
  }

  private get lastStage(): PipelineStage {
    return this.stages[this.stages.length - 1]!;
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
      const { output, abortEngine } = seq.processor.process(delta);
      if (abortEngine) {
        this.stages[0]!.client.abort([seq.sequenceId]);
        this.tracker.forget(seq.sequenceId);
      }
      parent.lastBatchId = stats.batchId;
      parent.lastBatchSize = stats.batchSize;
      let outputs = changed.get(parent);
      if (!outputs) changed.set(parent, (outputs = []));
      outputs.push(output);
      if (output.finishReason) {
        seq.finished = true;
        finishedSeqs.push(seq);
      }
    }
    for (const l of this.listeners) l.onStep(stepStats);
    for (const [parent, outputs] of changed) this.emit(parent, outputs);
    for (const seq of finishedSeqs) this.recordFinished(seq, seq.processor.finishReasonOr("stop"), false, iterationMs);
    for (const parent of changed.keys()) if (parent.sequences.every((s) => s.finished)) this.completeParent(parent, iterationMs);
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
      finished: parent.sequences.every((s) => s.finished), times: first.times,
    });
  }

  private recordFinished(seq: SequenceState, finishReason: FinishReason, clientAborted: boolean, atMs: number): void {
    const p = seq.parent.request;
    const stats = finishedRequestStats({
      requestId: seq.sequenceId, finishReason, clientAborted, numPromptTokens: p.promptTokenIds.length,
      numGenerationTokens: seq.processor.numGeneratedTokens, numCachedTokens: seq.numCachedTokens,
      maxTokensParam: p.sampling.maxTokens, n: p.sampling.n, times: seq.times, nowMs: atMs,
    });
    for (const l of this.listeners) l.onRequestFinished(stats);
  }

  /** every sequence finished normally: per-stage stats, then forget the request */
  private completeParent(parent: ParentState, atMs: number): void {
    parent.done = true;
    parent.queue.end();
    this.forgetParent(parent);
    const stages: StageRequestStats[] = this.stages.map((s) => ({
      stageId: s.stageId, numTokensIn: parent.request.promptTokenIds.length,
      numTokensOut: parent.sequences.reduce((sum, q) => sum + q.processor.numGeneratedTokens, 0),
      batchId: parent.lastBatchId, batchSize: parent.lastBatchSize,
      stageGenTimeMs: atMs - (parent.stageSubmitMs[s.stageId] ?? atMs),
      postprocessTimeMs: 0, // the last stage hands its output to no one
    }));
    const edges: TransferEdgeStats[] = [];
    for (const l of this.listeners) l.onPipelineRequestFinished?.(parent.request.externalRequestId ?? parent.request.requestId, stages, edges);
  }

  /** client gone: abort every unfinished sequence in the engine (blocks freed at once) and end the stream */
  private abortParent(parent: ParentState, clientAborted: boolean): void {
    if (parent.done) return;
    parent.done = true;
    const open = parent.sequences.filter((s) => !s.finished);
    this.stages[0]!.client.abort(open.map((s) => s.sequenceId));
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
    if (this.isHealthy()) this.stages[0]!.client.abort(open.map((s) => s.sequenceId));
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
    const seq = this.sequences.get(sequenceId);
    if (seq) this.failParent(seq.parent, new EngineRequestError(code, message));
  }

  private onFatal(message: string): void {
    this.healthy = false;
    this.fatalMessage = message;
    for (const parent of [...this.parents.values()]) this.failParent(parent, new EngineDeadError(`engine is dead: ${message}`));
  }
}

/** child i of an n > 1 request: one sequence, its own seed (seed + i, as vLLM's ParentRequest) */
function childSampling(sampling: SamplingParams, index: number): SamplingParams {
  if (sampling.n === 1) return sampling;
  return { ...sampling, n: 1, seed: sampling.seed === null ? null : sampling.seed + index };
}

/** Builds the tokenizer (main thread: metadata only) and starts the pipeline's engines. */
export async function createEngineFrontend(options: EngineFrontendOptions): Promise<Orchestrator & { readonly stages: readonly PipelineStage[] }> {
  let tokenizer = options.tokenizer;
  if (!tokenizer) {
    const { openModelGguf } = await import("../gguf/model-source.ts");
    const { createTokenizer } = await import("../tokenizer/gguf-tokenizer.ts");
    const gguf = await openModelGguf(options.modelPath);
    if (!gguf.ok) throw new Error(gguf.error);
    tokenizer = createTokenizer(gguf.value);
  }
  const orchestrator = new EngineFrontend(tokenizer, options.listeners ?? []);
  await orchestrator.start(options);
  return orchestrator;
}
