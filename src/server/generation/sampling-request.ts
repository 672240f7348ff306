/**
 * The sampling side of every generating dialect's preparation, on vLLM's field names (the form OpenAI chat and
 * completions bodies have, and the one other dialects translate into): the body's fields -> SamplingParams, the one
 * resolution of max_tokens (which field, its per-prompt budget against the context), truncate_prompt_tokens, and the
 * one server-side check of the finished parameters (vllm/entrypoints/openai/protocol.py to_sampling_params,
 * vllm/sampling_params.py SamplingParams._verify_args, serving_engine.py _validate_input for the context rules; the
 * engine keeps its own boundary check). Framework-free; throws ApiError (400) naming the parameter.
 * @example const { promptTokenIds, sampling } = fitPrompt(ids, toSamplingParams(input), limits);
 */
import type { SamplingParams } from "../../engine/sampling-params.ts";
import { DEFAULT_SAMPLING_PARAMS, validateSamplingParams } from "../../engine/sampling-params.ts";
import { ApiError, invalidParam } from "../errors.ts";

/** vLLM's sampling fields of a request body, already past the schema (types are right, ranges not yet checked). */
export interface SamplingBody {
  readonly n?: number | null;
  readonly temperature?: number | null;
  readonly top_p?: number | null;
  readonly top_k?: number | null;
  readonly min_p?: number | null;
  readonly presence_penalty?: number | null;
  readonly frequency_penalty?: number | null;
  readonly repetition_penalty?: number | null;
  readonly logit_bias?: Readonly<Record<string, number>> | null;
  readonly seed?: number | null;
  readonly stop?: string | readonly string[] | null;
  readonly stop_token_ids?: readonly number[] | null;
  readonly include_stop_str_in_output?: boolean | null;
  readonly ignore_eos?: boolean | null;
  readonly min_tokens?: number | null;
  readonly skip_special_tokens?: boolean | null;
  readonly prompt_logprobs?: number | null;
  readonly priority?: number | null;
  readonly cache_salt?: string | null;
  readonly kv_transfer_params?: Readonly<Record<string, unknown>> | null;
}

/** The output budget a request asks for (null = up to the context) and the field it came from, for messages. */
export interface RequestedMaxTokens {
  readonly value: number | null;
  readonly param: "max_tokens" | "max_completion_tokens";
}

/**
 * Which budget a body asks for: chat's max_completion_tokens wins over its deprecated max_tokens (vLLM); `fallback`
 * when neither is set (completions: 16, chat: null = up to the context).
 * @example requestedMaxTokens({ max_tokens: 5 }, 16) // { value: 5, param: "max_tokens" }
 */
export function requestedMaxTokens(body: { readonly max_tokens?: number | null; readonly max_completion_tokens?: number | null }, fallback: number | null): RequestedMaxTokens {
  if (body.max_completion_tokens !== undefined && body.max_completion_tokens !== null) return { value: body.max_completion_tokens, param: "max_completion_tokens" };
  return { value: body.max_tokens ?? fallback, param: "max_tokens" };
}

export interface SamplingInput {
  readonly body: SamplingBody;
  readonly maxTokens: RequestedMaxTokens;
  /** top logprobs per generated token, null = none */
  readonly logprobs: number | null;
}

/** What a prompt is fitted against: the model, the server's limits and the request's truncation. */
export interface PromptLimits {
  readonly maxModelLen: number;
  readonly vocabSize: number;
  /** --max-logprobs; absent = vLLM's 20 */
  readonly maxLogprobs?: number;
  readonly truncatePromptTokens: number | null | undefined;
  /** the field the budget came from (messages name it) */
  readonly maxTokensParam: RequestedMaxTokens["param"];
  /** the field an empty prompt is reported under */
  readonly promptParam: string;
}

/** vLLM clamps logit_bias values to this range instead of refusing them. */
const LOGIT_BIAS_LIMIT = 100;

/**
 * Sampling parameters from the body: defaults filled, logit_bias keys read, max_tokens as requested (null = up to
 * the context). Their ranges are not checked here but once, by fitPrompt, when the request is complete.
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
    maxTokens: input.maxTokens.value,
    skipSpecialTokens: b.skip_special_tokens ?? d.skipSpecialTokens,
    structuredOutputs: null, allowedTokenIds: null, badWordsTokenIds: [],
    priority: b.priority ?? d.priority,
    cacheSalt: b.cache_salt ?? d.cacheSalt,
    kvTransferParams: b.kv_transfer_params ?? null,
  };
  // one sequence per transfer: n children would read (and free) the same remote blocks
  if (params.kvTransferParams !== null && params.n !== 1) throw invalidParam("kv_transfer_params", `kv_transfer_params needs n = 1 (got n = ${params.n}).`, params.n);
  const { value: maxTokens, param } = input.maxTokens;
  if (maxTokens !== null && maxTokens < 1) throw invalidParam(param, `${param} must be at least 1, got ${maxTokens}.`, maxTokens);
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

/** Runs the engine's checks (vLLM's SamplingParams._verify_args) and turns a failure into vLLM's 400. */
function checkSamplingParams(params: SamplingParams, vocabSize: number, maxLogprobs?: number): void {
  const error = validateSamplingParams(params, maxLogprobs === undefined ? { vocabSize } : { vocabSize, maxLogprobs });
  if (error !== null) throw invalidParam(error.param, error.message, error.value);
}

/**
 * One tokenized prompt made ready for the engine, the same way for every dialect: truncated (truncate_prompt_tokens),
 * refused when empty, given its output budget (resolveMaxTokens), and its finished sampling parameters checked: the
 * one server-side validation of sampling parameters.
 * @example fitPrompt([1, 2, 3], sampling, { maxModelLen: 512, vocabSize: 32000, truncatePromptTokens: null, maxTokensParam: "max_tokens", promptParam: "prompt" })
 */
export function fitPrompt(fullIds: readonly number[], sampling: SamplingParams, limits: PromptLimits): { promptTokenIds: readonly number[]; sampling: SamplingParams } {
  const promptTokenIds = truncatePrompt(fullIds, limits.truncatePromptTokens, limits.maxModelLen, sampling.maxTokens);
  if (promptTokenIds.length === 0) throw new ApiError("badRequest", "The decoder prompt cannot be empty", limits.promptParam);
  const maxTokens = resolveMaxTokens(promptTokenIds.length, sampling.maxTokens, limits.maxTokensParam, limits.maxModelLen);
  const fitted = { ...sampling, maxTokens };
  checkSamplingParams(fitted, limits.vocabSize, limits.maxLogprobs);
  return { promptTokenIds, sampling: fitted };
}
