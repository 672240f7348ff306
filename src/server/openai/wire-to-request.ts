/**
 * Framework-free mapping from validated wire bodies (snake_case) to the GenerateRequest fields the orchestrator takes
 * (camelCase), with vLLM's semantic checks and messages (vllm/entrypoints/openai/protocol.py to_sampling_params and
 * the request validators, vllm/sampling_params.py SamplingParams._verify_args, serving_engine.py
 * _validate_input for the context-length rules): sampling ranges, n, logprobs, stream options. Throws ApiError
 * (400/404) naming the parameter.
 */
import type { SamplingParams } from "../../engine/sampling-params.ts";
import { DEFAULT_SAMPLING_PARAMS, validateSamplingParams } from "../../engine/sampling-params.ts";
import { ApiError, invalidParam } from "../errors.ts";
import type { ChatCompletionBody, CompletionBody, StreamOptionsBody } from "./schemas.ts";
import { jsonPreview } from "../../util/json-limits.ts";

export interface UsageMode {
  /** send the final usage-only chunk (choices: []) */
  readonly includeUsage: boolean;
  /** put a running usage on every chunk */
  readonly continuousUsage: boolean;
}

/** vLLM should_include_usage: --enable-force-include-usage forces both, else the client's stream_options. */
export function usageMode(streamOptions: StreamOptionsBody | null | undefined, forceIncludeUsage: boolean): UsageMode {
  if (forceIncludeUsage) return { includeUsage: true, continuousUsage: true };
  const includeUsage = streamOptions?.include_usage === true;
  return { includeUsage, continuousUsage: includeUsage && streamOptions?.continuous_usage_stats === true };
}

/** null/empty model = the served model; anything else must match it (404 like vLLM). */
export function checkModel(requested: string | null | undefined, servedModelName: string): void {
  if (requested === undefined || requested === null || requested === "" || requested === servedModelName) return;
  throw new ApiError("notFound", `The model \`${requested}\` does not exist.`, "model");
}

export function checkStreamOptions(stream: boolean | null | undefined, streamOptions: unknown): void {
  if (streamOptions !== undefined && streamOptions !== null && stream !== true) {
    throw new ApiError("badRequest", "Stream options can only be defined when `stream=True`.", "stream_options");
  }
}

/** The request-level fields checkRequestOptions reads (chat and completions). */
interface RequestOptionsBody {
  readonly stream?: boolean | null;
  readonly n?: number | null;
  readonly prompt_logprobs?: number | null;
  readonly use_beam_search?: boolean | null;
  readonly truncate_prompt_tokens?: number | null;
  readonly best_of?: number | null;
}

/** Request-level rules vLLM checks besides the sampling ranges, and what fennec does not do (refused, not ignored). */
export function checkRequestOptions(body: RequestOptionsBody): void {
  if (body.use_beam_search === true) throw new ApiError("badRequest", "use_beam_search is not supported by fennec.", "use_beam_search");
  if (body.truncate_prompt_tokens !== undefined && body.truncate_prompt_tokens !== null && body.truncate_prompt_tokens < -1) {
    throw invalidParam("truncate_prompt_tokens", `truncate_prompt_tokens must be -1 or at least 0, got ${body.truncate_prompt_tokens}.`, body.truncate_prompt_tokens);
  }
  if (body.best_of !== undefined && body.best_of !== null && body.best_of !== (body.n ?? 1)) {
    throw invalidParam("best_of", `best_of must equal n (${body.n ?? 1}) or be unset, got ${body.best_of}.`, body.best_of);
  }
  if (body.stream === true && body.prompt_logprobs !== undefined && body.prompt_logprobs !== null) {
    throw new ApiError("badRequest", "`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  }
}

/** Fields chat and completions share, already past the schema (types are right, ranges not yet checked). */
type SharedBody = Pick<ChatCompletionBody, "n" | "temperature" | "top_p" | "top_k" | "min_p" | "presence_penalty"
  | "frequency_penalty" | "repetition_penalty" | "logit_bias" | "seed" | "stop" | "stop_token_ids"
  | "include_stop_str_in_output" | "ignore_eos" | "min_tokens" | "skip_special_tokens" | "prompt_logprobs" | "priority" | "cache_salt" | "kv_transfer_params">;

export interface SamplingInput {
  readonly body: SharedBody;
  /** the requested output budget (null = up to the context) and the field it came from, for messages */
  readonly maxTokens: number | null;
  readonly maxTokensParam: "max_tokens" | "max_completion_tokens";
  /** top logprobs per generated token, null = none */
  readonly logprobs: number | null;
  readonly vocabSize: number;
  /** --max-logprobs; absent = vLLM's 20 */
  readonly maxLogprobs?: number;
}

function checkTokenIds(param: string, ids: readonly number[], vocabSize: number): void {
  const bad = ids.filter((id) => id < 0 || id >= vocabSize);
  if (bad.length > 0) {
    throw invalidParam(param, `token id(s) ${jsonPreview(bad, 200)} in ${param} are out of vocabulary (size ${vocabSize}).`);
  }
}

/** Runs the engine's checks (vLLM's SamplingParams._verify_args) and turns a failure into vLLM's 400. */
export function checkSamplingParams(params: SamplingParams, vocabSize: number, maxLogprobs?: number): void {
  const error = validateSamplingParams(params, maxLogprobs === undefined ? { vocabSize } : { vocabSize, maxLogprobs });
  if (error !== null) throw invalidParam(error.param, error.message, error.value);
}

/** vLLM clamps logit_bias values to this range instead of refusing them. */
const LOGIT_BIAS_LIMIT = 100;

/**
 * Sampling parameters from the wire body, checked by the engine's validator. maxTokens is the requested budget
 * (null = up to the context); resolveMaxTokens fixes it per prompt, and checkSamplingParams runs again then.
 */
export function toSamplingParams(input: SamplingInput): SamplingParams {
  const b = input.body;
  const d = DEFAULT_SAMPLING_PARAMS;
  let logitBias: Record<number, number> | null = null;
  if (b.logit_bias) {
    logitBias = {};
    for (const [key, bias] of Object.entries(b.logit_bias)) {
      if (!/^\d+$/.test(key)) throw invalidParam("logit_bias", `logit_bias keys must be token ids, got ${JSON.stringify(key)}.`);
      logitBias[Number(key)] = Math.max(-LOGIT_BIAS_LIMIT, Math.min(LOGIT_BIAS_LIMIT, bias));
    }
  }
  const params: SamplingParams = {
    n: b.n ?? d.n,
    temperature: b.temperature ?? d.temperature,
    topP: b.top_p ?? d.topP,
    topK: b.top_k ?? d.topK,
    minP: b.min_p ?? d.minP,
    presencePenalty: b.presence_penalty ?? d.presencePenalty,
    frequencyPenalty: b.frequency_penalty ?? d.frequencyPenalty,
    repetitionPenalty: b.repetition_penalty ?? d.repetitionPenalty,
    logitBias,
    seed: b.seed ?? null,
    logprobs: input.logprobs,
    promptLogprobs: b.prompt_logprobs ?? null,
    stop: b.stop === undefined || b.stop === null ? [] : typeof b.stop === "string" ? [b.stop] : [...b.stop],
    stopTokenIds: [...(b.stop_token_ids ?? [])],
    includeStopStrInOutput: b.include_stop_str_in_output ?? d.includeStopStrInOutput,
    ignoreEos: b.ignore_eos ?? d.ignoreEos,
    minTokens: b.min_tokens ?? d.minTokens,
    maxTokens: input.maxTokens,
    skipSpecialTokens: b.skip_special_tokens ?? d.skipSpecialTokens,
    structuredOutputs: null, allowedTokenIds: null, badWordsTokenIds: [],
    priority: b.priority ?? d.priority,
    cacheSalt: b.cache_salt ?? d.cacheSalt,
    kvTransferParams: b.kv_transfer_params ?? null,
  };
  // one sequence per transfer: n children would read (and free) the same remote blocks
  if (params.kvTransferParams !== null && params.n !== 1) throw invalidParam("kv_transfer_params", `kv_transfer_params needs n = 1 (got n = ${params.n}).`, params.n);
  if (input.maxTokens !== null && input.maxTokens < 1) {
    throw invalidParam(input.maxTokensParam, `${input.maxTokensParam} must be at least 1, got ${input.maxTokens}.`, input.maxTokens);
  }
  checkSamplingParams(params, input.vocabSize, input.maxLogprobs);
  return params;
}

/**
 * vLLM's context-length rules: returns the output budget for this prompt, or throws its 400 messages.
 * @example resolveMaxTokens(6, 5, "max_tokens", 512) // 5
 */
export function resolveMaxTokens(numPromptTokens: number, maxTokens: number | null, param: string, maxModelLen: number): number {
  if (maxTokens === null) {
    if (numPromptTokens >= maxModelLen) {
      const what = numPromptTokens === maxModelLen ? " plus the number of requested output tokens (at least 1)" : "";
      throw invalidParam("input_tokens", `The decoder prompt (length ${numPromptTokens})${what} is longer than the maximum model length of ${maxModelLen}. Make sure that \`max_model_len\` is no smaller than the number of text tokens.`, numPromptTokens);
    }
    return maxModelLen - numPromptTokens;
  }
  if (maxTokens > maxModelLen) {
    throw invalidParam(param, `${param}=${maxTokens} cannot be greater than max_model_len=max_total_tokens=${maxModelLen}. Please request fewer output tokens.`, maxTokens);
  }
  if (numPromptTokens + maxTokens > maxModelLen) {
    throw invalidParam("input_tokens", `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${maxTokens} output tokens and your prompt contains ${numPromptTokens} input tokens, for a total of ${numPromptTokens + maxTokens} tokens. Please reduce the length of the input prompt or the number of requested output tokens.`, numPromptTokens);
  }
  return maxTokens;
}

/**
 * vLLM's truncate_prompt_tokens: keep the last k tokens (left truncation); -1 keeps as many as fit beside the
 * requested output (at least one token when max_tokens is unset).
 * @example truncatePrompt([1, 2, 3, 4], 2, 512, 16) // [3, 4]
 */
export function truncatePrompt(tokenIds: readonly number[], keep: number | null | undefined, maxModelLen: number, maxTokens: number | null): readonly number[] {
  if (keep === undefined || keep === null) return tokenIds;
  const limit = keep === -1 ? Math.max(0, maxModelLen - (maxTokens ?? 1)) : keep;
  return tokenIds.length > limit ? tokenIds.slice(tokenIds.length - limit) : tokenIds;
}

/** Completions prompt forms -> one list of prompts, each text or token ids. */
export type PromptInput = { readonly text: string } | { readonly tokenIds: readonly number[] };

export function promptsOf(prompt: CompletionBody["prompt"]): PromptInput[] {
  if (typeof prompt === "string") return [{ text: prompt }];
  if (prompt.length === 0) return [];
  const first = prompt[0];
  if (typeof first === "string") return (prompt as string[]).map((text) => ({ text }));
  if (typeof first === "number") return [{ tokenIds: prompt as number[] }];
  return (prompt as number[][]).map((tokenIds) => ({ tokenIds }));
}

export function checkPromptTokenIds(tokenIds: readonly number[], vocabSize: number): void {
  checkTokenIds("prompt", tokenIds, vocabSize);
}

/** `X-Request-Id` header, else the body's request_id, else a random hex id (vLLM). */
export function publicRequestId(header: string | null | undefined, bodyId: string | null | undefined): string {
  if (header) return header;
  if (bodyId) return bodyId;
  return crypto.randomUUID().replaceAll("-", "");
}

export function unixSeconds(nowMs: number): number {
  return Math.floor(nowMs / 1000);
}
