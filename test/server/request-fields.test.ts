/**
 * Every OpenAI and vLLM row of the request-field table (src/server/openai/request-fields.ts = docs/request-fields.md; the
 * llama.cpp and Ollama rows are request-fields-fates.test.ts's) sent to every endpoint it names, on the fake orchestrator (made a pooling model for /v1/embeddings) (which records what would reach the engine): an implemented field
 * changes the engine request or the answer; a no-op field changes neither; a refused field is a 400 naming it, and
 * passes at its inert default. A row without an example here fails, so a new field cannot skip its check.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REQUEST_FIELDS, type Endpoint } from "../../src/server/openai/request-fields.ts";
import type { ResolvedPooler } from "../../src/engine/resolve-pooler.ts";
import type { EncodeOutput, EncodeRequest } from "../../src/frontend/orchestrator.ts";
import { requestFieldsDoc } from "../../scripts/request-fields-doc.ts";
import { testServer, type Json } from "./helpers.ts";

interface Example {
  /** the value sent (per endpoint when they differ) */
  readonly value: unknown;
  readonly chat?: unknown;
  readonly completions?: unknown;
  readonly embeddings?: unknown;
  /** replaces the endpoint's BASE body (the chat form of /v1/embeddings has messages instead of input) */
  readonly baseBy?: Partial<Record<Endpoint, Json>>;
  /** sent with the field and in the baseline it is compared to (per endpoint in withBy) */
  readonly with?: Json;
  readonly withBy?: Partial<Record<Endpoint, Json>>;
  /** expected status (default: 400 for refused rows, else 200) */
  readonly status?: number;
  /** implemented fields whose effect the fake cannot show (the chat template or a parser uses them): accepted only */
  readonly acceptedOnly?: boolean;
}

const TOOL = { type: "function", function: { name: "f", parameters: { type: "object" } } };
/** the chat form of /v1/embeddings */
const EMBED_CHAT = { embeddings: { messages: [{ role: "user", content: "hi" }] } };
const EXAMPLES: Readonly<Record<string, Example>> = {
  messages: { value: [{ role: "user", content: "other words" }], baseBy: EMBED_CHAT },
  prompt: { value: "other words" },
  model: { value: "nope", status: 404 },
  frequency_penalty: { value: 0.5 }, presence_penalty: { value: 0.5 }, repetition_penalty: { value: 1.2 },
  logit_bias: { value: { "5": 3 } },
  logprobs: { value: null, chat: true, completions: 2 },
  top_logprobs: { value: 2, with: { logprobs: true } },
  max_tokens: { value: 2 }, max_completion_tokens: { value: 2 },
  n: { value: 2, with: { temperature: 1 } },
  response_format: { value: { type: "json_object" } },
  structured_outputs: { value: { regex: "[a-z]+" } },
  guided_json: { value: { type: "object" } }, guided_regex: { value: "[a-z]" }, guided_choice: { value: ["a"] },
  guided_grammar: { value: 'root ::= "a"' }, json_schema: { value: { type: "object" } }, grammar: { value: 'root ::= "a"' },
  guided_decoding_backend: { value: "xgrammar", with: { guided_choice: ["a"] } },
  guided_whitespace_pattern: { value: "[ ]?", with: { guided_json: { type: "object" } } },
  seed: { value: 7 }, stop: { value: ["x"] }, stop_token_ids: { value: [5] }, include_stop_str_in_output: { value: true },
  ignore_eos: { value: true }, min_tokens: { value: 1 }, stream: { value: true },
  stream_options: { value: { include_usage: true }, with: { stream: true } },
  temperature: { value: 0.5 }, top_p: { value: 0.5 }, top_k: { value: 5 }, min_p: { value: 0.1 },
  tools: { value: [TOOL], with: { tool_choice: "none" }, acceptedOnly: true },
  // tools without tool_choice mean auto (a 400 without --enable-auto-tool-choice): the baseline has none
  tool_choice: { value: "none", acceptedOnly: true },
  parallel_tool_calls: { value: false, acceptedOnly: true },
  reasoning_effort: { value: "low", acceptedOnly: true },
  include_reasoning: { value: false, acceptedOnly: true },
  // needs --reasoning-parser, which this server has not: vLLM's 400 naming it (run in thinking-token-budget.test.ts)
  thinking_token_budget: { value: 10, status: 400 },
  user: { value: "someone" }, use_beam_search: { value: true }, length_penalty: { value: 0.5 },
  skip_special_tokens: { value: false }, spaces_between_special_tokens: { value: false },
  truncate_prompt_tokens: { value: 1 }, truncation_side: { value: "right" }, prompt_logprobs: { value: 1 },
  logprob_token_ids: { value: [1], withBy: { chat: { logprobs: true }, completions: { logprobs: 1 } } },
  allowed_token_ids: { value: [5, 6] }, bad_words: { value: ["hi"] },
  echo: { value: true, with: { messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "Sure" }], add_generation_prompt: false } },
  add_generation_prompt: { value: false, embeddings: true, baseBy: EMBED_CHAT, acceptedOnly: true },
  continue_final_message: { value: true, with: { messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "Sure" }], add_generation_prompt: false }, acceptedOnly: true, baseBy: { embeddings: {} } },
  add_special_tokens: { value: true, embeddings: false, acceptedOnly: true },
  documents: { value: [{ text: "d" }], acceptedOnly: true },
  chat_template: { value: "{{ messages[0].content }}", status: 400, baseBy: EMBED_CHAT },
  chat_template_kwargs: { value: { x: 1 }, acceptedOnly: true, baseBy: EMBED_CHAT },
  media_io_kwargs: { value: { a: 1 } }, mm_processor_kwargs: { value: { a: 1 } },
  priority: { value: 1 }, request_id: { value: "my-id" }, session_id: { value: "s1" },
  return_tokens_as_token_ids: { value: true, withBy: { chat: { logprobs: true }, completions: { logprobs: 1 } } },
  return_token_ids: { value: true }, routed_experts_prompt_start: { value: 3 }, return_token_offsets: { value: true },
  return_prompt_text: { value: true }, return_assistant_tokens_mask: { value: true }, cache_salt: { value: "tenant-1" },
  kv_transfer_params: { value: { do_remote_prefill: true } }, ec_transfer_params: { value: { a: 1 } },
  vllm_xargs: { value: { a: 1 } }, repetition_detection: { value: { max_pattern_size: 4, min_pattern_size: 1, min_count: 3 } },
  stream_interval: { value: 4 }, suffix: { value: "end" }, best_of: { value: 3, status: 400 },
  prompt_embeds: { value: "AAAA" }, store: { value: true }, metadata: { value: { k: "v" } }, service_tier: { value: "auto" },
  functions: { value: [{ name: "f", parameters: {} }] }, function_call: { value: "auto" },
  prediction: { value: { type: "content", content: "x" } }, modalities: { value: ["text", "audio"] }, audio: { value: { voice: "x" } },
  web_search_options: { value: {} }, logits_processors: { value: ["x"] },
  input: { value: "other words" }, encoding_format: { value: "base64" },
  // the fake pooling model is not matryoshka: vLLM's 400 naming the field
  dimensions: { value: 2, status: 400 }, normalize: { value: false }, use_activation: { value: false },
  embed_dtype: { value: "float16" }, endianness: { value: "big", with: { encoding_format: "base64" } }, padding: { value: "max_length" },
};

const BASE: Record<Endpoint, Json> = { chat: { messages: [{ role: "user", content: "hi" }], max_tokens: 4 }, completions: { prompt: "hi", max_tokens: 4 }, embeddings: { input: "hi" } };
const PATH: Record<Endpoint, string> = { chat: "/v1/chat/completions", completions: "/v1/completions", embeddings: "/v1/embeddings" };

/** the fake made a pooling model for /v1/embeddings: it records what each pooling request asked for */
function poolingFake(s: ReturnType<typeof testServer>): EncodeRequest[] {
  const seen: EncodeRequest[] = [];
  const pooler: ResolvedPooler = { poolingType: "LAST", normalize: true, dimensions: null, hiddenSize: 2, matryoshka: null, source: "gguf" };
  Object.assign(s.fake, {
    pooler,
    encode: async (r: EncodeRequest): Promise<EncodeOutput> => {
      seen.push(r);
      const v = Float32Array.of(r.promptTokenIds.length, r.promptTokenIds[0]!);
      return { requestId: r.requestId, embedding: r.pooling.normalize ? v.map((x) => x / Math.hypot(...v)) : v, numPromptTokens: r.promptTokenIds.length, numCachedTokens: 0, times: { arrivalMs: 0, queuedMs: null, scheduledMs: null, firstTokenMs: null, lastTokenMs: null } };
    },
  });
  return seen;
}

/** what the engine would get and what the client got, minus the fields that differ on every call */
async function observe(endpoint: Endpoint, body: Json): Promise<{ status: number; param: string | null; seen: string }> {
  const s = testServer();
  const pooled = endpoint === "embeddings" ? poolingFake(s) : [];
  const res = await s.call("POST", PATH[endpoint], body);
  // random ids and timestamps differ on every call; a request_id the client chose does not
  const text = (await res.text()).replace(/"created":\d+/g, "").replace(/(cmpl|embd)-[0-9a-f]{32}/g, "$1-");
  let param: string | null = null;
  try { param = (JSON.parse(text) as Json).error?.param ?? null; } catch { /* SSE */ }
  const sent = endpoint === "embeddings"
    ? pooled.map((r) => ({ prompt: r.promptTokenIds, pooling: r.pooling, priority: r.priority, cacheSalt: r.cacheSalt }))
    : s.fake.requests.map((r) => ({ prompt: r.promptTokenIds, sampling: r.sampling }));
  return { status: res.status, param, seen: JSON.stringify(sent) + text };
}

describe("docs/request-fields.md", () => {
  test("is the table in request-fields.ts", () => {
    expect(readFileSync(join(import.meta.dir, "..", "..", "docs", "request-fields.md"), "utf8")).toBe(requestFieldsDoc());
  });
  test("every OpenAI and vLLM row has an example here (llama.cpp's and Ollama's are in request-fields-fates.test.ts)", () => {
    expect(ROWS.map((f) => f.name).filter((n) => EXAMPLES[n] === undefined)).toEqual([]);
  });
});

const ROWS = REQUEST_FIELDS.filter((f) => f.source === "openai" || f.source === "vllm");
const CASES = ROWS.flatMap((f) => f.endpoints.map((e) => [f.name, e, f.fate] as const));

describe("every field has the fate its row says", () => {
  test.each(CASES)("%s on %s: %s", async (name, endpoint, fate) => {
    const ex = EXAMPLES[name]!;
    const value = (endpoint === "chat" ? ex.chat : endpoint === "completions" ? ex.completions : ex.embeddings) ?? ex.value;
    const baseline = { ...(ex.baseBy?.[endpoint] ?? BASE[endpoint]), ...(ex.with ?? {}), ...(ex.withBy?.[endpoint] ?? {}) };
    const withField = { ...baseline, [name]: value };
    const got = await observe(endpoint, withField);
    const status = ex.status ?? (fate === "refused" ? 400 : 200);
    expect(got.status).toBe(status);
    if (status === 400) expect(got.param).toBe(name);
    if (status !== 200) return;
    const base = await observe(endpoint, baseline);
    expect(base.status).toBe(200);
    if (fate === "no-op") expect(got.seen).toBe(base.seen);
    if (fate === "implemented" && !ex.acceptedOnly) expect(got.seen).not.toBe(base.seen);
  });
});
