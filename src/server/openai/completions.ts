/**
 * POST /v1/completions (legacy): a string, a token-id list, or a list of either. Each prompt is one engine request;
 * choices are numbered prompt_index * n + i (vLLM). Per-request metrics only for one prompt with n = 1. One
 * preparation step (prepareCompletion), then generation, then a response builder of completion-response.ts.
 */
import { Elysia } from "elysia";
import { refuseOnPoolingModel } from "./embedding-request.ts";
import type { SamplingParams } from "../../engine/sampling-params.ts";
import type { GenerateRequest } from "../../frontend/orchestrator.ts";
import { nowMs } from "../../util/clock.ts";
import { ApiError } from "../errors.ts";
import type { ServerLoad } from "../load.ts";
import type { ServerOptions } from "../server-options.ts";
import { completionBody, completionChunks, type CompletionAnswer } from "./completion-response.ts";
import { collectGeneration, generateOutputs, linkAbort, mergeAsync, primed, type RequestAbort } from "./generation.ts";
import { CompletionRequest, type CompletionBody } from "./schemas.ts";
import { COMPLETION_RESPONSES } from "./response-docs.ts";
import { sseResponse } from "./stream.ts";
import { checkModel, checkPromptTokenIds, checkRequestOptions, checkSamplingParams, checkStreamOptions, promptsOf, publicRequestId, resolveMaxTokens, toSamplingParams, truncatePrompt, unixSeconds, usageMode } from "./wire-to-request.ts";
import { systemFingerprint } from "./fingerprint.ts";
import { extrasContext, samplingExtras } from "./sampling-extras.ts";
import { refuseFields } from "./request-fields.ts";
import { logprobTokenizer } from "./logprobs.ts";
import { checkPromptChars, encodePrompt } from "./prompt-text.ts";

interface PreparedPrompt {
  readonly text: string;
  readonly tokenIds: readonly number[];
  readonly sampling: SamplingParams;
}

/** The engine requests (one per prompt) and everything their answer depends on, checked once, before anything runs. */
export interface PreparedCompletion {
  readonly requests: readonly GenerateRequest[];
  readonly answer: CompletionAnswer;
}

/**
 * The preparation step (vLLM serving_completion.py create_completion up to the generators): model, stream options
 * and request-level rules, sampling from the body, each prompt tokenized, truncated and given its context budget, ids.
 * Throws ApiError (400/404) naming the parameter.
 */
export async function prepareCompletion(options: ServerOptions, body: CompletionBody, requestIdHeader: string | null, arrivalMs: number): Promise<PreparedCompletion> {
  const { orchestrator } = options;
  const { tokenizer } = orchestrator;
  checkModel(body.model, options.servedModelName);
  refuseOnPoolingModel(options, "Completions");
  checkStreamOptions(body.stream, body.stream_options);
  checkRequestOptions(body);
  refuseFields(body, "completions");
  if (body.suffix) throw new ApiError("badRequest", "suffix is not supported", "suffix");
  const inputs = promptsOf(body.prompt);
  if (inputs.length === 0) throw new ApiError("badRequest", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
  const checked = { ...toSamplingParams({ body, maxTokens: body.max_tokens ?? 16, maxTokensParam: "max_tokens", logprobs: body.logprobs ?? null, vocabSize: tokenizer.vocabSize, ...(options.maxLogprobs !== undefined ? { maxLogprobs: options.maxLogprobs } : {}) }), ...await samplingExtras(body, extrasContext(options)) };
  // vLLM: echo with logprobs also scores the prompt (prompt_logprobs = logprobs unless set)
  const echoLogprobs = body.echo === true && body.logprobs !== undefined && body.logprobs !== null;
  const sampling = echoLogprobs && checked.promptLogprobs === null ? { ...checked, promptLogprobs: body.logprobs ?? null } : checked;
  const addSpecial = body.add_special_tokens ?? true;
  // every text prompt is bounded before any is tokenized (unless it is to be truncated: vLLM tokenizes it whole first)
  const truncates = body.truncate_prompt_tokens !== undefined && body.truncate_prompt_tokens !== null;
  if (!truncates) for (const input of inputs) if ("text" in input) checkPromptChars(tokenizer, orchestrator.maxModelLen, input.text.length, "prompt");
  const encoded = await Promise.all(inputs.map((input) => ("text" in input ? encodePrompt(tokenizer, input.text, { addSpecial, parseSpecial: true }) : null)));
  const prompts: PreparedPrompt[] = inputs.map((input, i) => {
    const isText = "text" in input;
    if (isText ? input.text === "" : input.tokenIds.length === 0) {
      throw new ApiError("badRequest", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
    }
    const fullIds = encoded[i] ?? ("tokenIds" in input ? input.tokenIds : []);
    if (!isText) checkPromptTokenIds(fullIds, tokenizer.vocabSize);
    const tokenIds = truncatePrompt(fullIds, body.truncate_prompt_tokens, orchestrator.maxModelLen, sampling.maxTokens);
    if (tokenIds.length === 0) throw new ApiError("badRequest", "The decoder prompt cannot be empty", "prompt");
    const maxTokens = resolveMaxTokens(tokenIds.length, sampling.maxTokens, "max_tokens", orchestrator.maxModelLen);
    checkSamplingParams({ ...sampling, maxTokens }, tokenizer.vocabSize, options.maxLogprobs);
    const text = isText && tokenIds === fullIds ? input.text : tokenizer.decode(tokenIds, { skipSpecialTokens: true });
    return { text, tokenIds, sampling: { ...sampling, maxTokens } };
  });

  const id = `cmpl-${publicRequestId(requestIdHeader, body.request_id)}`;
  const suffix = crypto.randomUUID().slice(0, 8);
  // the stats tables name each prompt as the client knows it: the response id, `-<i>` per prompt when there are several (vLLM)
  const externalId = (i: number) => (prompts.length === 1 ? id : `${id}-${i}`);
  return {
    requests: prompts.map((p, i) => ({ requestId: `${id}-${i}-${suffix}`, externalRequestId: externalId(i), promptTokenIds: p.tokenIds, sampling: p.sampling, arrivalMs })),
    answer: {
      id, created: unixSeconds(arrivalMs), model: options.servedModelName, tokenizer: logprobTokenizer(tokenizer, body.return_tokens_as_token_ids ?? options.returnTokensAsTokenIds ?? false), n: sampling.n,
      prompts: prompts.map((p) => ({ text: p.text, tokenIds: p.tokenIds })), echo: body.echo === true,
      returnTokenIds: body.return_token_ids === true, numTop: body.logprobs ?? null,
      fingerprint: systemFingerprint({ ...options, maxModelLen: orchestrator.maxModelLen }),
      usage: usageMode(body.stream_options, options.forceIncludeUsage),
      enablePromptTokensDetails: options.enablePromptTokensDetails === true, enablePerRequestMetrics: options.enablePerRequestMetrics,
    },
  };
}

export async function createCompletion(options: ServerOptions, body: CompletionBody, requestIdHeader: string | null, clientSignal: AbortSignal | undefined): Promise<Response | Record<string, unknown>> {
  const { requests, answer } = await prepareCompletion(options, body, requestIdHeader, nowMs());
  const { orchestrator } = options;
  const aborts: RequestAbort[] = requests.map((r) => linkAbort(clientSignal, options.shutdownSignal, () => options.log(`${r.requestId} aborted: the client disconnected`)));
  const disposeAll = () => aborts.forEach((a) => a.dispose());
  if (body.stream !== true) {
    try {
      return completionBody(answer, await Promise.all(requests.map((r, i) => collectGeneration(orchestrator, r, aborts[i]!))));
    } finally {
      disposeAll();
    }
  }
  const tagged = requests.map((r, i) => (async function* () {
    for await (const output of generateOutputs(orchestrator, r, aborts[i]!)) yield { promptIndex: i, output };
  })());
  const outputs = await primed(mergeAsync(tagged)).catch((error: unknown) => {
    disposeAll();
    throw error;
  });
  const chunks = completionChunks(answer, outputs, () => aborts.some((a) => a.controller.signal.aborted));
  return sseResponse(chunks, { onCancel: () => aborts.forEach((a) => a.clientGone()), onEnd: disposeAll, log: options.log });
}

/** `track` counts the request for GET /load (server/load.ts) until its response is over. */
export function completionsRoutes(options: ServerOptions, track: ServerLoad["track"] = (handler) => handler()) {
  return new Elysia({ name: "openai-completions" }).post(
    "/v1/completions",
    ({ body, headers, request }) => track(() => createCompletion(options, body, headers["x-request-id"] ?? null, request.signal)),
    {
      body: CompletionRequest,
      detail: {
        tags: ["OpenAI"],
        summary: "Create a completion (legacy)",
        description: "OpenAI Completions: `prompt` is a string, a list of strings, a token-id list or a list of token-id lists. Streams as server-sent events with `stream: true`.",
        security: [{ bearerAuth: [] }],
        responses: COMPLETION_RESPONSES,
      },
    },
  );
}
