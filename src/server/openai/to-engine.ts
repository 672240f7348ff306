/**
 * Framework-free mapping from validated wire bodies (snake_case) to what the orchestrator takes (camelCase), with
 * vLLM's semantic checks and messages (reference §5.2, §5.5): sampling ranges, n, logprobs, stream options and the
 * context-length rules. Throws ApiError (400/404) naming the parameter.
 */
import type { SamplingParams } from "../../engine/sampling-params.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../engine/sampling-params.ts";
import { ApiError, invalidParam } from "../errors.ts";
import type { ChatCompletionBody, CompletionBody, StreamOptionsBody } from "./schemas.ts";

/** vLLM's limits. */
export const MAX_N = 16384;
export const MAX_LOGPROBS = 20;

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

function inRange(param: string, value: number, lo: number, hi: number, loOpen = false): void {
  const ok = Number.isFinite(value) && (loOpen ? value > lo : value >= lo) && value <= hi;
  if (!ok) throw invalidParam(param, `${param} must be in ${loOpen ? "(" : "["}${lo}, ${hi}], got ${value}.`, value);
}

/** Fields chat and completions share, already past the schema (types are right, ranges not yet checked). */
type SharedBody = Pick<ChatCompletionBody, "n" | "temperature" | "top_p" | "top_k" | "min_p" | "presence_penalty"
  | "frequency_penalty" | "repetition_penalty" | "logit_bias" | "seed" | "stop" | "stop_token_ids"
  | "include_stop_str_in_output" | "ignore_eos" | "min_tokens" | "skip_special_tokens">;

export interface SamplingInput {
  readonly body: SharedBody;
  /** the requested output budget (null = up to the context) and the field it came from, for messages */
  readonly maxTokens: number | null;
  readonly maxTokensParam: "max_tokens" | "max_completion_tokens";
  /** top logprobs per generated token, null = none */
  readonly logprobs: number | null;
  readonly vocabSize: number;
}

function checkTokenIds(param: string, ids: readonly number[], vocabSize: number): void {
  const bad = ids.filter((id) => id < 0 || id >= vocabSize);
  if (bad.length > 0) {
    throw invalidParam(param, `token id(s) ${JSON.stringify(bad)} in ${param} are out of vocabulary (size ${vocabSize}).`);
  }
}

/** Sampling parameters with vLLM's checks; maxTokens is resolved later against the prompt (resolveMaxTokens). */
export function toSamplingParams(input: SamplingInput): SamplingParams {
  const b = input.body;
  const d = DEFAULT_SAMPLING_PARAMS;
  const n = b.n ?? 1;
  if (n < 1) throw invalidParam("n", `n must be at least 1, got ${n}.`, n);
  if (n > MAX_N) throw invalidParam("n", `n must be at most ${MAX_N}, got ${n}.`, n);
  const temperature = b.temperature ?? 1;
  inRange("temperature", temperature, 0, 2);
  if (n > 1 && temperature === 0) throw invalidParam("n", `n must be 1 when using greedy sampling, got ${n}.`, n);
  const topP = b.top_p ?? d.topP;
  inRange("top_p", topP, 0, 1, true);
  const topK = b.top_k ?? d.topK;
  if (topK < -1) throw invalidParam("top_k", `top_k must be -1 or 0 (disable), or at least 1, got ${topK}.`, topK);
  const minP = b.min_p ?? d.minP;
  inRange("min_p", minP, 0, 1);
  const presencePenalty = b.presence_penalty ?? d.presencePenalty;
  inRange("presence_penalty", presencePenalty, -2, 2);
  const frequencyPenalty = b.frequency_penalty ?? d.frequencyPenalty;
  inRange("frequency_penalty", frequencyPenalty, -2, 2);
  const repetitionPenalty = b.repetition_penalty ?? d.repetitionPenalty;
  if (!(Number.isFinite(repetitionPenalty) && repetitionPenalty > 0)) {
    throw invalidParam("repetition_penalty", `repetition_penalty must be a positive finite number, got ${repetitionPenalty}.`, repetitionPenalty);
  }
  if (input.maxTokens !== null && input.maxTokens < 1) {
    throw invalidParam(input.maxTokensParam, `${input.maxTokensParam} must be at least 1, got ${input.maxTokens}.`, input.maxTokens);
  }
  const minTokens = b.min_tokens ?? d.minTokens;
  if (minTokens < 0) throw invalidParam("min_tokens", `min_tokens must be greater than or equal to 0, got ${minTokens}.`, minTokens);
  if (input.maxTokens !== null && minTokens > input.maxTokens) {
    throw invalidParam("min_tokens", `min_tokens must be less than or equal to ${input.maxTokensParam}=${input.maxTokens}, got ${minTokens}.`, minTokens);
  }
  if (input.logprobs !== null && input.logprobs > MAX_LOGPROBS) {
    throw invalidParam("logprobs", `Requested sample logprobs of ${input.logprobs}, which is greater than max allowed: ${MAX_LOGPROBS}`, input.logprobs);
  }
  if (input.logprobs !== null && input.logprobs < 0) throw invalidParam("logprobs", `logprobs must be non-negative, got ${input.logprobs}.`, input.logprobs);
  const stop = b.stop === undefined || b.stop === null ? [] : typeof b.stop === "string" ? [b.stop] : [...b.stop];
  if (stop.some((s) => s === "")) throw invalidParam("stop", "stop strings must not be empty.");
  const stopTokenIds = [...(b.stop_token_ids ?? [])];
  checkTokenIds("stop_token_ids", stopTokenIds, input.vocabSize);
  let logitBias: Record<number, number> | null = null;
  if (b.logit_bias) {
    logitBias = {};
    for (const [key, bias] of Object.entries(b.logit_bias)) {
      const id = Number(key);
      if (!/^\d+$/.test(key) || id >= input.vocabSize) {
        throw invalidParam("logit_bias", `logit_bias key ${JSON.stringify(key)} is not a token id in [0, ${input.vocabSize}).`);
      }
      inRange("logit_bias", bias, -100, 100);
      logitBias[id] = bias;
    }
  }
  return {
    n, temperature, topP, topK, minP, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias,
    seed: b.seed ?? null,
    logprobs: input.logprobs,
    promptLogprobs: null,
    stop, stopTokenIds,
    includeStopStrInOutput: b.include_stop_str_in_output ?? false,
    ignoreEos: b.ignore_eos ?? false,
    minTokens,
    maxTokens: input.maxTokens,
    skipSpecialTokens: b.skip_special_tokens ?? true,
  };
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
