/** The llm_request span's attributes from a request's timestamps and parameters (output_processor.py do_tracing). */
import { describe, expect, test } from "bun:test";
import { requestSpanAttributes, type FinishedRequestFacts } from "../../src/tracing/request-span.ts";

const facts = (over: Partial<FinishedRequestFacts> = {}): FinishedRequestFacts => ({
  requestId: "cmpl-1",
  sampling: { topP: 0.9, maxTokens: 16, temperature: 0.7, n: 2 },
  times: { arrivalMs: 1000, queuedMs: 1010, scheduledMs: 1050, firstTokenMs: 1250, lastTokenMs: 1750 },
  numPromptTokens: 7, numCompletionTokens: 9, finishedMs: 1760, ...over,
});

describe("requestSpanAttributes", () => {
  test("every interval from one clock, in seconds, under vLLM's names", () => {
    expect(requestSpanAttributes(facts())).toEqual({
      "gen_ai.request.id": "cmpl-1",
      "gen_ai.usage.prompt_tokens": 7,
      "gen_ai.usage.completion_tokens": 9,
      "gen_ai.latency.time_to_first_token": 0.25,
      "gen_ai.latency.e2e": 0.75,
      "gen_ai.latency.time_in_queue": 0.04,
      "gen_ai.latency.time_in_model_prefill": 0.2,
      "gen_ai.latency.time_in_model_decode": 0.5,
      "gen_ai.latency.time_in_model_inference": 0.7,
      "gen_ai.request.top_p": 0.9,
      "gen_ai.request.max_tokens": 16,
      "gen_ai.request.temperature": 0.7,
      "gen_ai.request.n": 2,
    });
  });

  test("parameters that are not truthy are left out (vLLM: temperature 0, no max_tokens)", () => {
    const a = requestSpanAttributes(facts({ sampling: { topP: 1, maxTokens: null, temperature: 0, n: 1 } }));
    expect(a["gen_ai.request.temperature"]).toBeUndefined();
    expect(a["gen_ai.request.max_tokens"]).toBeUndefined();
    expect(a["gen_ai.request.top_p"]).toBe(1);
  });

  test("a request that never produced a token: no TTFT, prefill or decode; e2e ends when it finished", () => {
    const a = requestSpanAttributes(facts({ times: { arrivalMs: 1000, queuedMs: 1001, scheduledMs: null, firstTokenMs: null, lastTokenMs: null }, finishedMs: 1500 }));
    expect(a["gen_ai.latency.e2e"]).toBe(0.5);
    for (const name of ["time_to_first_token", "time_in_queue", "time_in_model_prefill", "time_in_model_decode", "time_in_model_inference"]) expect(a[`gen_ai.latency.${name}`]).toBeUndefined();
  });
});
