/**
 * What vLLM's render endpoints answer for one prompt: its GenerateRequest (vllm/entrypoints/serve/disagg/protocol.py,
 * built by vllm/entrypoints/serve/render/serving.py ServingRender), the token-in form of a chat or completion request
 * after the template, the tokenizer and the context budget: a KV-aware router (llm-d's precise prefix-cache scorer)
 * hashes `token_ids` into the same block keys the engine's KV events carry, and a token-in server can run it as is.
 * `sampling_params` is vLLM's SamplingParams by its field names, with max_tokens resolved for the prompt.
 */
import type { SamplingParams } from "../../../engine/sampling-params.ts";
import type { GrammarSpec } from "../../../grammar/grammar-spec.ts";
import type { GenerateRequest } from "../../../frontend/orchestrator.ts";

/** The request-level fields the render copies from the body (vLLM: model, stream, stream_options). */
export interface RenderedBodyFields {
  readonly model?: string | null;
  readonly stream?: boolean | null;
  readonly stream_options?: { readonly include_usage?: boolean | null; readonly continuous_usage_stats?: boolean | null } | null;
}

/** GrammarSpec -> vLLM StructuredOutputsParams: the one constraint under its own key */
const STRUCTURED_OUTPUTS: { readonly [K in GrammarSpec["kind"]]: (spec: Extract<GrammarSpec, { kind: K }>) => Record<string, unknown> } = {
  json: (s) => ({ json: JSON.parse(s.schema) as unknown, ...(s.anyWhitespace ? {} : { disable_any_whitespace: true }) }),
  json_object: (s) => ({ json_object: true, ...(s.anyWhitespace ? {} : { disable_any_whitespace: true }) }),
  regex: (s) => ({ regex: s.pattern }),
  choice: (s) => ({ choice: [...s.choices] }),
  grammar: (s) => ({ grammar: s.ebnf }),
  structural_tag: (s) => ({ structural_tag: s.tag }),
};

function structuredOutputs(spec: GrammarSpec | null): Record<string, unknown> | null {
  if (spec === null) return null;
  return (STRUCTURED_OUTPUTS[spec.kind] as (s: GrammarSpec) => Record<string, unknown>)(spec);
}

/**
 * vLLM SamplingParams by its field names (vllm/sampling_params.py), from the request's checked parameters.
 * @example samplingParamsJson(DEFAULT_SAMPLING_PARAMS).max_tokens // 16
 */
export function samplingParamsJson(s: SamplingParams): Record<string, unknown> {
  return {
    n: s.n, presence_penalty: s.presencePenalty, frequency_penalty: s.frequencyPenalty, repetition_penalty: s.repetitionPenalty,
    temperature: s.temperature, top_p: s.topP, top_k: s.topK, min_p: s.minP, seed: s.seed, stop: [...s.stop],
    stop_token_ids: [...s.stopTokenIds], ignore_eos: s.ignoreEos, max_tokens: s.maxTokens, min_tokens: s.minTokens,
    logprobs: s.logprobs, prompt_logprobs: s.promptLogprobs, include_stop_str_in_output: s.includeStopStrInOutput,
    skip_special_tokens: s.skipSpecialTokens, structured_outputs: structuredOutputs(s.structuredOutputs),
    logit_bias: s.logitBias === null ? null : { ...s.logitBias }, allowed_token_ids: s.allowedTokenIds === null ? null : [...s.allowedTokenIds],
    extra_args: s.kvTransferParams ? { kv_transfer_params: s.kvTransferParams } : null,
  };
}

/**
 * One GenerateRequest as vLLM's render endpoints write it (pydantic model_dump: every field, null when unset).
 * @example generateRequestJson({ requestId: "r", promptTokenIds: [1, 2], sampling, arrivalMs: 0 }, { model: "m" })
 */
export function generateRequestJson(request: GenerateRequest, body: RenderedBodyFields): Record<string, unknown> {
  const stream = body.stream === true;
  const so = body.stream_options ?? null;
  return {
    request_id: request.externalRequestId ?? request.requestId,
    token_ids: [...request.promptTokenIds],
    // text-only prompts: no multimodal hashes or placeholders
    features: null,
    sampling_params: samplingParamsJson(request.sampling),
    model: body.model ?? null,
    stream,
    // vLLM StreamOptions' defaults fill what the client left out
    stream_options: stream && so !== null ? { include_usage: so.include_usage ?? true, continuous_usage_stats: so.continuous_usage_stats ?? false } : null,
    cache_salt: request.sampling.cacheSalt,
    priority: request.sampling.priority,
    kv_transfer_params: request.sampling.kvTransferParams ?? null,
  };
}
