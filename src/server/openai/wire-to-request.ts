/**
 * The OpenAI request rules chat and completions share, framework-free, with vLLM's messages
 * (vllm/entrypoints/openai/protocol.py request validators): the model name, stream options and usage, request-level
 * options fennec refuses, completions' prompt forms and token ids, the public request id. Sampling parameters and
 * the context rules are the shared preparation's (server/generation/sampling-request.ts). Throws ApiError (400/404)
 * naming the parameter.
 */
import { ApiError, invalidParam } from "../errors.ts";
import type { CompletionBody, StreamOptionsBody } from "./schemas.ts";
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

function checkTokenIds(param: string, ids: readonly number[], vocabSize: number): void {
  const bad = ids.filter((id) => id < 0 || id >= vocabSize);
  if (bad.length > 0) {
    throw invalidParam(param, `token id(s) ${jsonPreview(bad, 200)} in ${param} are out of vocabulary (size ${vocabSize}).`);
  }
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
