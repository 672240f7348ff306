/**
 * POST /v1/completions (legacy): a string, a token-id list, or a list of either. Each prompt is one engine request;
 * choices are numbered prompt_index * n + i (vLLM). Per-request metrics only for one prompt with n = 1.
 */
import { Elysia } from "elysia";
import type { PositionLogprobs } from "../../engine/protocol.ts";
import type { SamplingParams } from "../../engine/sampling-params.ts";
import type { RequestOutput } from "../../frontend/orchestrator.ts";
import { nowMs } from "../../util/clock.ts";
import { ApiError } from "../errors.ts";
import type { ServerLoad } from "../load.ts";
import type { ServerOptions } from "../server-options.ts";
import { applyOutput, collectGeneration, generateOutputs, linkAbort, mergeAsync, newChoice, primed, type ChoiceResult, type RequestAbort } from "./generation.ts";
import { appendCompletionLogprobs, appendPromptCompletionLogprobs, emptyCompletionLogprobs, promptLogprobsWire, type CompletionLogprobs } from "./logprobs.ts";
import { CompletionRequest, type CompletionBody } from "./schemas.ts";
import { COMPLETION_RESPONSES } from "./response-docs.ts";
import { sseResponse } from "./stream.ts";
import { checkModel, checkPromptTokenIds, checkRequestOptions, checkSamplingParams, checkStreamOptions, promptsOf, publicRequestId, resolveMaxTokens, toSamplingParams, truncatePrompt, unixSeconds, usageMode } from "./to-engine.ts";
import { systemFingerprint } from "./fingerprint.ts";
import { extrasContext, samplingExtras } from "./sampling-extras.ts";
import { finalStreamUsageWire, metricsWire, promptTokensDetails, usageWire } from "./usage.ts";

type RequestTimes = RequestOutput["times"];

interface PreparedPrompt {
  readonly text: string;
  readonly tokenIds: readonly number[];
  readonly sampling: SamplingParams;
}

/** With `echo`, `echoed` holds the prompt and its logprobs: they come first, as in vLLM. */
function logprobsOf(options: ServerOptions, numTop: number | null, choice: ChoiceResult, echoed: EchoedPrompt | null): CompletionLogprobs | null {
  if (numTop === null) return null;
  const out = emptyCompletionLogprobs();
  const { tokenizer } = options.orchestrator;
  const offset = echoed === null ? 0 : appendPromptCompletionLogprobs(out, tokenizer, echoed.tokenIds, echoed.logprobs ?? [], numTop, 0);
  appendCompletionLogprobs(out, tokenizer, choice.logprobs, numTop, offset);
  return out;
}

interface EchoedPrompt {
  readonly tokenIds: readonly number[];
  readonly logprobs: readonly (PositionLogprobs | null)[] | null;
}

export async function createCompletion(options: ServerOptions, body: CompletionBody, requestIdHeader: string | null, clientSignal: AbortSignal | undefined): Promise<Response | Record<string, unknown>> {
  const arrivalMs = nowMs();
  const { orchestrator } = options;
  const { tokenizer } = orchestrator;
  checkModel(body.model, options.servedModelName);
  checkStreamOptions(body.stream, body.stream_options);
  checkRequestOptions(body);
  if (body.suffix) throw new ApiError("badRequest", "suffix is not supported", "suffix");
  const inputs = promptsOf(body.prompt);
  if (inputs.length === 0) throw new ApiError("badRequest", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
  const checked = { ...toSamplingParams({ body, maxTokens: body.max_tokens ?? 16, maxTokensParam: "max_tokens", logprobs: body.logprobs ?? null, vocabSize: tokenizer.vocabSize, ...(options.maxLogprobs !== undefined ? { maxLogprobs: options.maxLogprobs } : {}) }), ...await samplingExtras(body, extrasContext(options)) };
  // vLLM: echo with logprobs also scores the prompt (prompt_logprobs = logprobs unless set)
  const echoLogprobs = body.echo === true && body.logprobs !== undefined && body.logprobs !== null;
  const sampling = echoLogprobs && checked.promptLogprobs === null ? { ...checked, promptLogprobs: body.logprobs ?? null } : checked;
  const addSpecial = body.add_special_tokens ?? true;
  const prompts: PreparedPrompt[] = inputs.map((input) => {
    const isText = "text" in input;
    if (isText ? input.text === "" : input.tokenIds.length === 0) {
      throw new ApiError("badRequest", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
    }
    const fullIds = isText ? tokenizer.encode(input.text, { addSpecial, parseSpecial: true }) : input.tokenIds;
    if (!isText) checkPromptTokenIds(fullIds, tokenizer.vocabSize);
    const tokenIds = truncatePrompt(fullIds, body.truncate_prompt_tokens, orchestrator.maxModelLen, sampling.maxTokens);
    if (tokenIds.length === 0) throw new ApiError("badRequest", "The decoder prompt cannot be empty", "prompt");
    const maxTokens = resolveMaxTokens(tokenIds.length, sampling.maxTokens, "max_tokens", orchestrator.maxModelLen);
    checkSamplingParams({ ...sampling, maxTokens }, tokenizer.vocabSize, options.maxLogprobs);
    const text = isText && tokenIds === fullIds ? input.text : tokenizer.decode(tokenIds, { skipSpecialTokens: true });
    return { text, tokenIds, sampling: { ...sampling, maxTokens } };
  });

  const id = `cmpl-${publicRequestId(requestIdHeader, body.request_id)}`;
  const created = unixSeconds(arrivalMs);
  const model = options.servedModelName;
  const n = sampling.n;
  const echo = body.echo === true;
  const returnTokenIds = body.return_token_ids === true;
  const numTop = body.logprobs ?? null;
  const suffix = crypto.randomUUID().slice(0, 8);
  const engineId = (i: number) => `${id}-${i}-${suffix}`;
  // the stats tables name each prompt as the client knows it: the response id, `-<i>` per prompt when there are several (vLLM)
  const externalId = (i: number) => (prompts.length === 1 ? id : `${id}-${i}`);
  const requestOf = (p: PreparedPrompt, i: number) => ({ requestId: engineId(i), externalRequestId: externalId(i), promptTokenIds: p.tokenIds, sampling: p.sampling, arrivalMs });
  const aborts: RequestAbort[] = prompts.map((_, i) => linkAbort(clientSignal, options.shutdownSignal, () => options.log(`${engineId(i)} aborted: the client disconnected`)));
  const disposeAll = () => aborts.forEach((a) => a.dispose());
  const metricsInput = (times: RequestTimes | null, numGenerationTokens: number) =>
    ({ enabled: options.enablePerRequestMetrics, n, numPrompts: prompts.length, times, numGenerationTokens });

  if (body.stream !== true) {
    try {
      const results = await Promise.all(prompts.map((p, i) => collectGeneration(orchestrator, requestOf(p, i), aborts[i]!)));
      const choices = results.flatMap((r, p) => r.choices.map((c) => ({
        index: p * n + c.index,
        text: echo ? prompts[p]!.text + c.text : c.text,
        logprobs: logprobsOf(options, numTop, c, echo ? { tokenIds: prompts[p]!.tokenIds, logprobs: r.promptLogprobs } : null),
        finish_reason: c.finishReason,
        stop_reason: c.stopReason,
        token_ids: returnTokenIds ? c.tokenIds : null,
        prompt_logprobs: r.promptLogprobs ? promptLogprobsWire(tokenizer, r.promptLogprobs) : null,
        prompt_token_ids: returnTokenIds ? prompts[p]!.tokenIds : null,
        routed_experts: null,
      })));
      const promptTokens = results.reduce((s, r) => s + r.numPromptTokens, 0);
      const completionTokens = results.reduce((s, r) => s + r.choices.reduce((t, c) => t + c.numGeneratedTokens, 0), 0);
      return {
        id, object: "text_completion", created, model, choices,
        service_tier: null, system_fingerprint: systemFingerprint({ ...options, maxModelLen: orchestrator.maxModelLen }),
        usage: { ...usageWire(promptTokens, completionTokens), prompt_tokens_details: promptTokensDetails(options.enablePromptTokensDetails, results.reduce((s, r) => s + r.numCachedTokens, 0)) },
        kv_transfer_params: null,
        ec_transfer_params: null,
        metrics: metricsWire(metricsInput(results[0]!.times, completionTokens), false),
      };
    } finally {
      disposeAll();
    }
  }

  const usage = usageMode(body.stream_options, options.forceIncludeUsage);
  const promptTokens = prompts.reduce((s, p) => s + p.tokenIds.length, 0);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ id, object: "text_completion", created, model, choices, ...extra });
  const states = prompts.map(() => Array.from({ length: n }, (_, i) => newChoice(i)));
  const offsets = prompts.map((p) => Array.from({ length: n }, () => (echo ? p.text.length : 0)));
  const tagged = prompts.map((p, i) => (async function* () {
    for await (const output of generateOutputs(orchestrator, requestOf(p, i), aborts[i]!)) yield { promptIndex: i, output };
  })());
  const outputs = await primed(mergeAsync(tagged)).catch((error: unknown) => {
    disposeAll();
    throw error;
  });
  async function* chunks() {
    let times: RequestTimes | null = null;
    // each prompt's echo goes out with its first output, which carries the prompt logprobs (with logprobs set)
    const echoPending = prompts.map(() => echo);
    const cachedTokens = prompts.map(() => 0);
    for await (const { promptIndex, output } of outputs) {
      cachedTokens[promptIndex] = output.numCachedTokens;
      if (echoPending[promptIndex]) {
        echoPending[promptIndex] = false;
        for (let i = 0; i < n; i++) {
          let logprobs: CompletionLogprobs | null = null;
          if (numTop !== null) {
            logprobs = emptyCompletionLogprobs();
            offsets[promptIndex]![i] = appendPromptCompletionLogprobs(logprobs, tokenizer, prompts[promptIndex]!.tokenIds, output.promptLogprobs ?? [], numTop, 0);
          }
          yield chunk([{ index: promptIndex * n + i, text: prompts[promptIndex]!.text, logprobs, finish_reason: null }]);
        }
      }
      applyOutput(states[promptIndex]!, output);
      times = output.times;
      for (const o of output.outputs) {
        if (o.finishReason === null && o.textDelta === "" && (o.logprobsDelta?.length ?? 0) === 0) continue;
        let logprobs: CompletionLogprobs | null = null;
        if (numTop !== null) {
          logprobs = emptyCompletionLogprobs();
          offsets[promptIndex]![o.index] = appendCompletionLogprobs(logprobs, tokenizer, o.logprobsDelta ?? [], numTop, offsets[promptIndex]![o.index]!);
        }
        const index = promptIndex * n + o.index;
        const ids = returnTokenIds ? { token_ids: o.tokenIdsDelta } : {};
        const choice = o.finishReason === null
          ? { index, text: o.textDelta, logprobs, finish_reason: null, ...ids }
          : { index, text: o.textDelta, logprobs, finish_reason: o.finishReason, stop_reason: o.stopReason, ...ids };
        yield chunk([choice], usage.continuousUsage ? { usage: usageWire(prompts[promptIndex]!.tokenIds.length, o.numGeneratedTokens) } : {});
      }
    }
    if (aborts.some((a) => a.controller.signal.aborted)) return;
    if (usage.includeUsage) {
      const completionTokens = states.flat().reduce((s, c) => s + c.numGeneratedTokens, 0);
      const metrics = metricsWire(metricsInput(times, completionTokens), true);
      const finalUsage = finalStreamUsageWire(promptTokens, completionTokens, options.enablePromptTokensDetails, cachedTokens.reduce((s, c) => s + c, 0));
      yield chunk([], { usage: finalUsage, ...(metrics === null ? {} : { metrics }) });
    }
  }
  return sseResponse(chunks(), { onCancel: () => aborts.forEach((a) => a.clientGone()), onEnd: disposeAll, log: options.log });
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
