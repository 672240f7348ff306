/**
 * What the server sees of generation: the orchestrator's interface, its records (vLLM RequestOutput /
 * CompletionOutput) and the two engine errors the server tells apart with `instanceof` (vLLM v1/engine/exceptions.py:
 * EngineGenerateError, EngineDeadError). Text is already detokenized and stop strings applied
 * (frontend/output-processor.ts). One engine implements it (frontend/engine-frontend.ts), a chain of stages too
 * (pipeline/stage-pipeline.ts).
 */
import type { SamplingParams } from "../engine/sampling-params.ts";
import type { FinishReason, RequestTimes } from "../engine/stats.ts";
import type { KvHandoff, MultimodalInput, PoolingRequestParams, PositionLogprobs } from "../engine/protocol.ts";
import type { ResolvedPooler } from "../engine/resolve-pooler.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";

/** A request the engine refused or failed (bad prompt, too long, ...): recoverable, the engine lives on (HTTP 400). */
export class EngineRequestError extends Error {
  override readonly name = "EngineRequestError";
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/** The engine died (fatal error or Worker crash): every request fails and isHealthy() stays false (HTTP 500). */
export class EngineDeadError extends Error {
  override readonly name = "EngineDeadError";
}

export interface GenerateRequest {
  /** unique among running requests (the engine's id) */
  readonly requestId: string;
  /** the id the client sees (the response's `id`), which the omni stats tables print; default requestId */
  readonly externalRequestId?: string;
  readonly promptTokenIds: readonly number[];
  readonly sampling: SamplingParams;
  /** nowMs() when the HTTP request arrived */
  readonly arrivalMs: number;
  /** the W3C trace headers the request came with (vLLM's trace_headers: traceparent, tracestate), for its span */
  readonly traceHeaders?: Readonly<Record<string, string>> | null;
  /** multi-stage pipelines (pipeline/stage-pipeline.ts): stop after the first token and return the prompt's KV blocks */
  readonly exportKv?: boolean;
  /** multi-stage pipelines: the first `numTokens` prompt positions are already computed (EngineRequest.importKv) */
  readonly importKv?: KvHandoff;
  /** encoded images whose embeddings stand in for their placeholder tokens (EngineRequest.multimodal) */
  readonly multimodal?: readonly MultimodalInput[];
  /** the LoRA adapter (its served name) to run with (EngineRequest.loraName); absent: the base model */
  readonly loraName?: string;
}

/** One choice (index 0..n-1) of a request: what is new since the last output, plus totals. */
export interface CompletionOutput {
  readonly index: number;
  /** new text since the previous output of this choice */
  readonly textDelta: string;
  readonly tokenIdsDelta: readonly number[];
  readonly logprobsDelta?: readonly PositionLogprobs[];
  /** all tokens generated so far for this choice */
  readonly numGeneratedTokens: number;
  readonly finishReason: FinishReason | null;
  /** the stop string or stop token id that finished it (vLLM stop_reason) */
  readonly stopReason: string | number | null;
}

export interface RequestOutput {
  readonly requestId: string;
  /** only the choices that changed */
  readonly outputs: readonly CompletionOutput[];
  readonly numPromptTokens: number;
  readonly numCachedTokens: number;
  readonly promptLogprobs?: readonly (PositionLogprobs | null)[];
  /** every choice has finished */
  readonly finished: boolean;
  /** timings of choice 0 (per-request metrics use them only when n = 1) */
  readonly times: RequestTimes;
  /** with exportKv, on the finished output: the prompt's KV blocks (RequestDelta.kv) */
  readonly kv?: KvHandoff;
  /** on the finished output, with a KV connector between instances: the response's kv_transfer_params */
  readonly kvTransferParams?: Readonly<Record<string, unknown>>;
}

/** A pooling request (vLLM AsyncLLM.encode): the prompt is prefilled and its pooled hidden state comes back. */
export interface EncodeRequest {
  readonly requestId: string;
  readonly externalRequestId?: string;
  readonly promptTokenIds: readonly number[];
  readonly pooling: PoolingRequestParams;
  readonly priority: number;
  readonly cacheSalt: string | null;
  readonly arrivalMs: number;
}

/** vLLM PoolingRequestOutput for the embed task. */
export interface EncodeOutput {
  readonly requestId: string;
  readonly embedding: Float32Array;
  readonly numPromptTokens: number;
  readonly numCachedTokens: number;
  readonly times: RequestTimes;
}

export interface Orchestrator {
  readonly modelConfig: ModelConfig;
  readonly maxModelLen: number;
  readonly tokenizer: Tokenizer;
  /** the engine's pooling rules when the model is an embedding model (null or absent: it generates) */
  readonly pooler?: ResolvedPooler | null;
  /**
   * pooling engines: the prompt's embedding; aborting the signal aborts the request (rejects with an AbortError).
   * Absent where the orchestrator cannot pool (multi-stage pipelines)
   */
  encode?(request: EncodeRequest, signal?: AbortSignal): Promise<EncodeOutput>;
  /**
   * LoRA (--enable-lora; absent where the orchestrator cannot): registers an adapter in the engine (read and checked
   * there) under its name and the server's lora_int_id / forgets one; null, or the one-line reason
   */
  loadLora?(name: string, path: string, loraIntId: number): Promise<string | null>;
  unloadLora?(name: string): Promise<string | null>;
  /** yields outputs until finished; aborting the signal aborts the request (its blocks are freed at once) */
  generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput>;
  /** false once an engine died (fatal) or a device was lost: /health answers 503 */
  isHealthy(): boolean;
  /** why an engine died (its fatal message), null while all are alive */
  deathReason?(): string | null;
  /** vLLM's reset_prefix_cache: whether the cached prefixes were forgotten. Absent where there is no one engine */
  resetPrefixCache?(resetRunningRequests: boolean): Promise<boolean>;
  shutdown(): Promise<void>;
}
