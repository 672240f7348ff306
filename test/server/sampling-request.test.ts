/**
 * The shared sampling preparation every generating dialect uses (server/generation/sampling-request.ts): which
 * max_tokens field counts, the per-prompt budget, truncation, and the one server-side check of the finished
 * parameters, with vLLM's messages.
 */
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../src/server/errors.ts";
import { fitPrompt, requestedMaxTokens, toSamplingParams, type PromptLimits } from "../../src/server/generation/sampling-request.ts";

const LIMITS: PromptLimits = { maxModelLen: 16, vocabSize: 100, truncatePromptTokens: null, maxTokensParam: "max_tokens", promptParam: "prompt" };

function apiError(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error("no error thrown");
}

describe("requestedMaxTokens: one answer to which budget a body asks for", () => {
  test.each([
    [{ max_completion_tokens: 7, max_tokens: 3 }, null, { value: 7, param: "max_completion_tokens" }],
    [{ max_completion_tokens: null, max_tokens: 3 }, null, { value: 3, param: "max_tokens" }],
    [{}, null, { value: null, param: "max_tokens" }],
    [{}, 16, { value: 16, param: "max_tokens" }],
  ] as const)("%j (fallback %p) -> %j", (body, fallback, expected) => {
    expect(requestedMaxTokens(body, fallback)).toEqual(expected);
  });

  test("a budget below 1 is refused naming the field it came from", () => {
    const error = apiError(() => toSamplingParams({ body: {}, maxTokens: requestedMaxTokens({ max_completion_tokens: 0 }, null), logprobs: null }));
    expect([error.status, error.param, error.message]).toEqual([400, "max_completion_tokens", "max_completion_tokens must be at least 1, got 0. (parameter=max_completion_tokens, value=0)"]);
  });
});

describe("fitPrompt: the one check of the finished sampling parameters", () => {
  test("ranges are not checked while the body is read, only once the request is complete", () => {
    const sampling = toSamplingParams({ body: { temperature: 7 }, maxTokens: { value: 4, param: "max_tokens" }, logprobs: null });
    expect(sampling.temperature).toBe(7);
    const error = apiError(() => fitPrompt([1, 2, 3], sampling, LIMITS));
    expect([error.param, error.message]).toEqual(["temperature", "temperature must be in [0, 2], got 7.0. (parameter=temperature, value=7)"]);
  });

  test("without max_tokens the budget is the rest of the context, and min_tokens is checked against it", () => {
    const fitted = fitPrompt([1, 2, 3, 4, 5, 6], toSamplingParams({ body: { min_tokens: 10 }, maxTokens: { value: null, param: "max_tokens" }, logprobs: null }), LIMITS);
    expect(fitted.sampling.maxTokens).toBe(10);
    const error = apiError(() => fitPrompt([1, 2, 3, 4, 5, 6, 7], toSamplingParams({ body: { min_tokens: 10 }, maxTokens: { value: null, param: "max_tokens" }, logprobs: null }), LIMITS));
    expect([error.param, error.message]).toEqual(["min_tokens", "min_tokens must be less than or equal to max_tokens=9, got 10. (parameter=min_tokens, value=10)"]);
  });

  test("truncation keeps the last tokens; an empty prompt is refused under the dialect's field", () => {
    const sampling = toSamplingParams({ body: {}, maxTokens: { value: 4, param: "max_tokens" }, logprobs: null });
    expect(fitPrompt([1, 2, 3, 4, 5], sampling, { ...LIMITS, truncatePromptTokens: 2 }).promptTokenIds).toEqual([4, 5]);
    const error = apiError(() => fitPrompt([], sampling, { ...LIMITS, promptParam: "messages" }));
    expect([error.param, error.message]).toEqual(["messages", "The decoder prompt cannot be empty"]);
  });

  test("the context rules name input_tokens (vLLM _validate_input)", () => {
    const sampling = toSamplingParams({ body: {}, maxTokens: { value: 10, param: "max_tokens" }, logprobs: null });
    const error = apiError(() => fitPrompt([1, 2, 3, 4, 5, 6, 7], sampling, LIMITS));
    expect(error.param).toBe("input_tokens");
    expect(error.message).toStartWith("This model's maximum context length is 16 tokens. However, you requested 10 output tokens and your prompt contains 7 input tokens");
  });
});
