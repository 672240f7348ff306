/**
 * The completion's preparation (vLLM serving_completion.py create_completion up to the generators): the OpenAI
 * request rules, then the preparation every generating dialect shares (server/generation/prepare-generation.ts:
 * sampling parameters, structured outputs, each prompt tokenized and fitted to the context). Each prompt is one engine request; everything the
 * answer depends on is fixed in a CompletionAnswer before anything runs. Framework-free; throws ApiError (400/404).
 * @example const { requests, answer } = await prepareCompletion(options, body, context);
 */
import { refuseOnPoolingModel } from "../embedding/prepare.ts";
import type { SamplingParams } from "../../../engine/sampling-params.ts";
import type { GenerateRequest } from "../../../frontend/orchestrator.ts";
import { ApiError } from "../../errors.ts";
import type { ServerOptions } from "../../server-options.ts";
import type { RequestContext } from "../../request-context.ts";
import { requestedMaxTokens } from "../../generation/sampling-request.ts";
import { prepareTextGeneration, textSampling } from "../../generation/prepare-generation.ts";
import type { CompletionAnswer } from "./response.ts";
import type { CompletionBody } from "../schemas.ts";
import { checkModel, checkPromptTokenIds, checkRequestOptions, checkStreamOptions, promptsOf, publicRequestId, unixSeconds, usageMode } from "../wire-to-request.ts";
import { systemFingerprint } from "../fingerprint.ts";
import { logIgnoredFields, refuseFields } from "../request-fields.ts";
import { REASONING_PARSERS } from "../reasoning-parsers/registry.ts";
import { checkThinkingTokenBudget, withThinkingTokenBudget } from "../thinking-token-budget.ts";
import { noOutputLimit, resolveAliases } from "../field-aliases.ts";
import { logprobTokenizer } from "../logprobs.ts";

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
export async function prepareCompletion(options: ServerOptions, clientBody: CompletionBody, context: RequestContext): Promise<PreparedCompletion> {
  logIgnoredFields(options.log, context.bodyKeys, "completions");
  const body = resolveAliases(clientBody, "completions");
  // read first: the arrival is when preparation starts, not after the tokenizer ran
  const arrivalMs = context.arrivalMs;
  const { orchestrator } = options;
  const { tokenizer } = orchestrator;
  // a LoRA adapter's name runs the base model with it (vLLM _maybe_get_adapters); answers carry the adapter's name
  const loraName = options.lora?.has(body.model) === true ? body.model! : undefined;
  if (loraName === undefined) checkModel(body.model, options.servedModelName);
  refuseOnPoolingModel(options, "Completions");
  checkStreamOptions(body.stream, body.stream_options);
  checkRequestOptions(body);
  refuseFields(body, "completions");
  if (body.suffix) throw new ApiError("badRequest", "suffix is not supported", "suffix");
  const inputs = promptsOf(body.prompt);
  if (inputs.length === 0) throw new ApiError("badRequest", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
  // vLLM reads the prompt's own reasoning state: a prompt may open the reasoning, or the model's output does
  const reasoningParser = options.chat?.reasoningParser ? REASONING_PARSERS[options.chat.reasoningParser]! : null;
  const thinkingTokenBudget = checkThinkingTokenBudget(body.thinking_token_budget, reasoningParser);
  const requested = await textSampling(options, body, { maxTokens: requestedMaxTokens(body, noOutputLimit(clientBody) ? null : 16), logprobs: body.logprobs ?? null });
  // vLLM: echo with logprobs also scores the prompt (prompt_logprobs = logprobs unless set)
  const echoLogprobs = body.echo === true && body.logprobs !== undefined && body.logprobs !== null;
  const sampling = echoLogprobs && requested.promptLogprobs === null ? { ...requested, promptLogprobs: body.logprobs ?? null } : requested;
  const generations = await prepareTextGeneration(options, body, inputs, sampling, {
    maxTokensParam: "max_tokens", promptParam: "prompt",
    checkPrompt: (input, fullIds) => {
      if ("text" in input ? input.text === "" : input.tokenIds.length === 0) {
        throw new ApiError("badRequest", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
      }
      if (!("text" in input)) checkPromptTokenIds(fullIds, tokenizer.vocabSize);
    },
  });
  const prompts: PreparedPrompt[] = generations.map((g, i) => {
    const input = inputs[i]!;
    const tokenIds = g.promptTokenIds;
    // the echoed text: the client's own unless truncation cut it
    const text = "text" in input && tokenIds === g.fullIds ? input.text : tokenizer.decode(tokenIds, { skipSpecialTokens: true });
    return { text, tokenIds, sampling: withThinkingTokenBudget(tokenizer, reasoningParser, thinkingTokenBudget, tokenIds, g.sampling) };
  });

  const id = `cmpl-${publicRequestId(context.requestIdHeader, body.request_id)}`;
  const suffix = crypto.randomUUID().slice(0, 8);
  // the stats tables name each prompt as the client knows it: the response id, `-<i>` per prompt when there are several (vLLM)
  const externalId = (i: number) => (prompts.length === 1 ? id : `${id}-${i}`);
  return {
    requests: prompts.map((p, i) => ({ requestId: `${id}-${i}-${suffix}`, externalRequestId: externalId(i), promptTokenIds: p.tokenIds, sampling: p.sampling, arrivalMs, traceHeaders: context.traceHeaders, ...(loraName !== undefined ? { loraName } : {}) })),
    answer: {
      timings: body.timings_per_token === true,
      id, created: unixSeconds(arrivalMs), model: loraName ?? options.servedModelName, tokenizer: logprobTokenizer(tokenizer, body.return_tokens_as_token_ids ?? options.returnTokensAsTokenIds ?? false), n: sampling.n,
      prompts: prompts.map((p) => ({ text: p.text, tokenIds: p.tokenIds })), echo: body.echo === true,
      returnTokenIds: body.return_token_ids === true, numTop: body.logprobs ?? null,
      fingerprint: systemFingerprint({ ...options, maxModelLen: orchestrator.maxModelLen }),
      usage: usageMode(body.stream_options, options.forceIncludeUsage),
      enablePromptTokensDetails: options.enablePromptTokensDetails === true, enablePerRequestMetrics: options.enablePerRequestMetrics,
    },
  };
}

