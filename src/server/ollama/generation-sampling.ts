/**
 * The two steps around the shared preparation (generation/prepare-generation.ts) that only Ollama's requests need:
 * before it, `think` as vLLM's reasoning_effort (which sets the template's enable_thinking) and `format` as vLLM's
 * response_format; after it, llama.cpp's sampler chain with Ollama's options (options-table.ts) on the checked
 * parameters and num_ctx as this request's context limit. Framework-free; throws ApiError (400).
 * @example const sampling = withOllamaSampling(options, generation, fields.sampling);
 */
import { validateSamplingParams, type SamplingParams } from "../../engine/sampling-params.ts";
import { ApiError } from "../errors.ts";
import type { ServerOptions } from "../server-options.ts";
import type { CommonFields } from "./request-fields.ts";
import type { OllamaSampling } from "./options-table.ts";

/** The vLLM body fields a request's common Ollama fields become (sampling, max_tokens, format, think). */
export function vllmFields(options: ServerOptions, model: string, fields: CommonFields): Record<string, unknown> {
  const thinks = (options.chat?.reasoningParser ?? null) !== null;
  const think = fields.think;
  // ollama server/routes.go: think on a model without the thinking capability is a 400
  if (!thinks && think !== null && think !== false) throw new ApiError("badRequest", `"${model}" does not support thinking`);
  // true is Ollama's "medium"; false turns thinking off through the template (enable_thinking false)
  const effort = !thinks || think === null ? null : think === true ? "medium" : think === false ? "none" : think;
  return {
    ...fields.sampling.vllm,
    max_tokens: fields.sampling.maxTokens,
    ...(fields.responseFormat !== null ? { response_format: fields.responseFormat } : {}),
    ...(effort !== null ? { reasoning_effort: effort } : {}),
  };
}

/**
 * The checked parameters with llama.cpp's chain (Ollama's sampler) and num_ctx applied: the prompt must fit in num_ctx
 * and the output budget shrinks to what is left of it.
 */
export function withOllamaSampling(options: ServerOptions, prepared: { readonly promptTokenIds: readonly number[]; readonly sampling: SamplingParams }, ollama: OllamaSampling): SamplingParams {
  let maxTokens = prepared.sampling.maxTokens;
  const numCtx = ollama.numCtx;
  if (numCtx !== null) {
    const maxModelLen = options.orchestrator.maxModelLen;
    if (numCtx > maxModelLen) throw new ApiError("badRequest", `option "num_ctx" (${numCtx}) is larger than the context fennec was started with (--max-model-len ${maxModelLen})`);
    const numPrompt = prepared.promptTokenIds.length;
    if (numPrompt >= numCtx) throw new ApiError("badRequest", `the input length (${numPrompt} tokens) exceeds the context length (num_ctx ${numCtx})`);
    maxTokens = Math.min(maxTokens ?? numCtx, numCtx - numPrompt);
  }
  const sampling: SamplingParams = { ...prepared.sampling, maxTokens, llama: ollama.llama };
  const error = validateSamplingParams(sampling, { vocabSize: options.orchestrator.tokenizer.vocabSize });
  if (error !== null) throw new ApiError("badRequest", `invalid option: ${error.message}`);
  return sampling;
}
