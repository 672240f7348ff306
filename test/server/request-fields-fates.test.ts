/**
 * The llama.cpp and Ollama rows of the request-field table (src/server/openai/request-fields.ts = docs/request-fields.md),
 * each sent to /v1/chat/completions and /v1/completions on the fake orchestrator (which records the engine request):
 * an implemented sampler field changes SamplingParams as its row says (the samplers' effects on a distribution are
 * pinned in test/engine/llama-samplers.test.ts); an alias gives exactly the engine request (and prompt) of the field
 * it aliases, and disagreeing with it is a 400 naming the alias; a refused field is a 400 naming it and passes at its
 * inert value. A row without a case here fails, so a new field cannot skip its check. Unknown fields: vLLM's log line.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_LLAMA_SAMPLING_PARAMS, type LlamaSamplingParams, type SamplingParams } from "../../src/engine/sampling-params.ts";
import { REQUEST_FIELDS, type Endpoint } from "../../src/server/openai/request-fields.ts";
import { testServer, type Json } from "./helpers.ts";

const BASE: Record<"chat" | "completions", Json> = { chat: { messages: [{ role: "user", content: "hi" }], max_tokens: 4 }, completions: { prompt: "hi", max_tokens: 4 } };
const PATH = { chat: "/v1/chat/completions", completions: "/v1/completions" } as const;
/** a template that prints what thinking switches reach it, so the aliases' effect shows in the prompt */
const THINKING_TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}|thinking={{ enable_thinking }}|effort={{ reasoning_effort }}";

async function send(endpoint: "chat" | "completions", body: Json) {
  const logs: string[] = [];
  const s = testServer({ log: (line, level) => logs.push(`${level ?? "INFO"} ${line}`) }, { chatTemplate: THINKING_TEMPLATE });
  const res = await s.call("POST", PATH[endpoint], body);
  const json = (await res.json()) as Json;
  const r = s.fake.requests[0];
  return { status: res.status, json, param: (json.error?.param ?? null) as string | null, sampling: r?.sampling as SamplingParams | undefined, prompt: r?.promptTokenIds, logs };
}

/** implemented sampler rows: the value sent and the llama parameters (and other SamplingParams) it must produce */
interface SamplerCase {
  readonly value: unknown;
  readonly with?: Json;
  readonly llama?: Partial<LlamaSamplingParams>;
  readonly check?: (s: SamplingParams) => void;
  /** an out-of-range value: a 400 naming the field */
  readonly bad?: unknown;
}
const SAMPLERS: Readonly<Record<string, SamplerCase>> = {
  repeat_penalty: { value: 1.3, check: (s) => expect(s.repetitionPenalty).toBe(1.3), bad: 0 },
  repeat_last_n: { value: 16, llama: { repeatLastN: 16 }, bad: -2 },
  typical_p: { value: 0.5, llama: { typicalP: 0.5 }, bad: 1.5 },
  mirostat: { value: 2, llama: { mirostat: 2 }, bad: 3 },
  mirostat_tau: { value: 3, llama: { mirostatTau: 3 }, bad: -1 },
  mirostat_eta: { value: 0.2, llama: { mirostatEta: 0.2 }, bad: -1 },
  dry_multiplier: { value: 0.8, llama: { dryMultiplier: 0.8 }, check: (s) => expect(s.llama!.drySequenceBreakers.length).toBeGreaterThan(0), bad: -1 },
  // below 1: llama.cpp's default base, as its server replaces it
  dry_base: { value: 0.5, llama: { dryBase: 1.75 } },
  dry_allowed_length: { value: 4, llama: { dryAllowedLength: 4 }, bad: -1 },
  dry_penalty_last_n: { value: -1, llama: { dryPenaltyLastN: -1 }, bad: -2 },
  // the fake's tokens are single characters: "x" is its one token, id 120 + 3
  dry_sequence_breakers: { value: ["x"], with: { dry_multiplier: 0.8 }, check: (s) => expect(s.llama!.drySequenceBreakers).toEqual([{ headTokenId: "x".charCodeAt(0) + 3, tailTokenIds: [] }]), bad: [] },
  xtc_probability: { value: 0.5, llama: { xtcProbability: 0.5 }, bad: 1.5 },
  xtc_threshold: { value: 0.2, llama: { xtcThreshold: 0.2 }, bad: -0.1 },
  top_n_sigma: { value: 1.5, llama: { topNSigma: 1.5 } },
  dynatemp_range: { value: 0.3, llama: { dynatempRange: 0.3 }, bad: -1 },
  dynatemp_exponent: { value: 2, llama: { dynatempExponent: 2 } },
  min_keep: { value: 3, llama: { minKeep: 3 }, bad: -1 },
  samplers: { value: "kt", llama: { samplers: ["top_k", "temperature"] }, bad: ["top_k", "nope"] },
};

/** alias rows: the alias's value, and the body with the field it aliases (per endpoint) that must reach the engine identically */
interface AliasCase {
  readonly value: unknown;
  readonly same: Partial<Record<"chat" | "completions", Json>>;
  /** the alias together with its field set to something else: a 400 naming the alias */
  readonly conflict: Partial<Record<"chat" | "completions", Json>>;
  /** the alias must change the engine request from the base body */
  readonly changes?: boolean;
  /** a field of the base body left out (n_predict's budget is the base's max_tokens) */
  readonly drop?: string;
}
const ALIASES: Readonly<Record<string, AliasCase>> = {
  n_predict: { value: 2, drop: "max_tokens", same: { chat: { max_tokens: 2 }, completions: { max_tokens: 2 } }, conflict: { chat: { max_tokens: 3 }, completions: { max_tokens: 3 } }, changes: true },
  n_probs: { value: 2, same: { chat: { logprobs: true, top_logprobs: 2 }, completions: { logprobs: 2 } }, conflict: { chat: { logprobs: true, top_logprobs: 3 }, completions: { logprobs: 3 } }, changes: true },
  n_cmpl: { value: 2, same: { chat: { n: 2, temperature: 1 }, completions: { n: 2, temperature: 1 } }, conflict: { chat: { n: 3 }, completions: { n: 3 } }, changes: true },
  think: { value: false, same: { chat: { chat_template_kwargs: { enable_thinking: false } } }, conflict: { chat: { chat_template_kwargs: { enable_thinking: true } } }, changes: true },
  reasoning: { value: { effort: "none" }, same: { chat: { reasoning_effort: "none" } }, conflict: { chat: { reasoning_effort: "low" } }, changes: true },
};

/** refused rows: a value that is refused and one that passes (its inert default) */
const REFUSED: Readonly<Record<string, { readonly value: unknown; readonly inert: unknown }>> = {
  id_slot: { value: 2, inert: -1 }, post_sampling_probs: { value: true, inert: false },
  response_fields: { value: ["content"], inert: [] }, return_tokens: { value: true, inert: false }, return_progress: { value: true, inert: false },
  verbose: { value: true, inert: false }, n_indent: { value: 4, inert: 0 }, n_keep: { value: 8, inert: 0 }, n_discard: { value: 8, inert: 0 },
  n_cache_reuse: { value: 256, inert: 0 }, t_max_predict_ms: { value: 1000, inert: 0 }, sse_ping_interval: { value: 5, inert: -1 },
  adaptive_target: { value: 0.5, inert: -1 }, adaptive_decay: { value: 0.9, inert: null }, backend_sampling: { value: true, inert: false },
  lora: { value: [{ id: 0, scale: 1 }], inert: [] }, grammar_lazy: { value: true, inert: false }, grammar_triggers: { value: [{ type: 0, value: "x" }], inert: [] },
  preserved_tokens: { value: ["<tool>"], inert: [] }, grammar_type: { value: "json", inert: null }, chat_format: { value: 1, inert: null },
  chat_parser: { value: "x", inert: null }, reasoning_format: { value: "deepseek", inert: null }, generation_prompt: { value: "x", inert: null },
  parse_tool_calls: { value: true, inert: null }, reasoning_control: { value: true, inert: false }, reasoning_budget_tokens: { value: 10, inert: -1 },
  reasoning_budget_start_tag: { value: "<think>", inert: null }, reasoning_budget_end_tags: { value: ["</think>"], inert: [] },
  reasoning_budget_end_tag: { value: "</think>", inert: null }, reasoning_budget_message: { value: "x", inert: null },
  "speculative.n_max": { value: 16, inert: null }, "speculative.n_min": { value: 2, inert: null }, "speculative.p_min": { value: 0.75, inert: null },
  "speculative.type": { value: "ngram", inert: null }, "speculative.ngram_size_n": { value: 12, inert: null }, "speculative.ngram_size_m": { value: 48, inert: null },
  "speculative.ngram_min_hits": { value: 1, inert: null },
  options: { value: { temperature: 0.5 }, inert: {} }, format: { value: "json", inert: null }, raw: { value: true, inert: false }, num_ctx: { value: 4096, inert: null },
};

const ROWS = REQUEST_FIELDS.filter((f) => f.source === "llama.cpp" || f.source === "ollama");
/** llama.cpp rows that are vLLM-era aliases of structured outputs, checked in request-fields.test.ts */
const CHECKED_THERE = new Set(["json_schema", "grammar"]);
const cases = (fate: string) => ROWS.filter((f) => f.fate === fate && !CHECKED_THERE.has(f.name))
  .flatMap((f) => f.endpoints.filter((e): e is "chat" | "completions" => e !== "embeddings").map((e) => [f.name, e] as const));

describe("the llama.cpp and Ollama rows", () => {
  test("every row has a case here, and every case a row", () => {
    const here = new Set([...Object.keys(SAMPLERS), ...Object.keys(ALIASES), ...Object.keys(REFUSED), "cache_prompt", "timings_per_token", ...CHECKED_THERE]);
    expect(ROWS.map((f) => f.name).filter((n) => !here.has(n))).toEqual([]);
    expect([...here].filter((n) => !ROWS.some((f) => f.name === n))).toEqual([]);
  });
  test("the sources' rows are all here: llama.cpp's and Ollama's", () => {
    expect(new Set(ROWS.map((f) => f.source))).toEqual(new Set(["llama.cpp", "ollama"]));
  });
});

describe("implemented: llama.cpp's sampler fields reach the engine as SamplingParams.llama", () => {
  test.each(cases("implemented").filter(([n]) => n !== "cache_prompt" && n !== "timings_per_token"))("%s on %s", async (name, endpoint) => {
    const c = SAMPLERS[name]!;
    const base = await send(endpoint, BASE[endpoint]);
    expect(base.sampling!.llama ?? null).toBeNull();
    const got = await send(endpoint, { ...BASE[endpoint], ...(c.with ?? {}), [name]: c.value });
    expect(got.status).toBe(200);
    c.check?.(got.sampling!);
    // any llama.cpp field selects the chain; the fields not sent keep llama.cpp's defaults (breakers: checked above)
    const { drySequenceBreakers: _, ...llama } = got.sampling!.llama!;
    const { drySequenceBreakers: __, ...defaults } = DEFAULT_LLAMA_SAMPLING_PARAMS;
    expect(llama).toEqual({ ...defaults, ...(c.with?.["dry_multiplier"] ? { dryMultiplier: c.with["dry_multiplier"] } : {}), ...(c.llama ?? {}) });
    if (c.bad !== undefined) {
      const bad = await send(endpoint, { ...BASE[endpoint], ...(c.with ?? {}), [name]: c.bad });
      expect(bad.status).toBe(400);
      expect(bad.param).toBe(name);
    }
  });

  test("repeat_penalty disagreeing with repetition_penalty is a 400 naming it; agreeing passes", async () => {
    const bad = await send("chat", { ...BASE.chat, repeat_penalty: 1.2, repetition_penalty: 1.1 });
    expect([bad.status, bad.param]).toEqual([400, "repeat_penalty"]);
    expect((await send("chat", { ...BASE.chat, repeat_penalty: 1.2, repetition_penalty: 1.2 })).status).toBe(200);
  });

  test("the default DRY breakers are tokenized when dry_multiplier is on: the fake's '\\n', ':', '\"', '*' tokens", async () => {
    const got = await send("completions", { ...BASE.completions, dry_multiplier: 0.8 });
    expect(got.sampling!.llama!.drySequenceBreakers.map((b) => b.headTokenId).sort((a, b) => a - b)).toEqual(["\n", "\"", "*", ":"].map((c) => c.charCodeAt(0) + 3).sort((a, b) => a - b));
  });
});

describe("cache_prompt", () => {
  test.each(cases("implemented").filter(([n]) => n === "cache_prompt"))("%s on %s: false gives the request a cache namespace of its own; true changes nothing", async (_name, endpoint) => {
    const base = await send(endpoint, { ...BASE[endpoint], cache_salt: "t1" });
    const on = await send(endpoint, { ...BASE[endpoint], cache_salt: "t1", cache_prompt: true });
    expect(on.sampling).toEqual(base.sampling!);
    const off1 = await send(endpoint, { ...BASE[endpoint], cache_salt: "t1", cache_prompt: false });
    const off2 = await send(endpoint, { ...BASE[endpoint], cache_salt: "t1", cache_prompt: false });
    expect(off1.status).toBe(200);
    expect(off1.sampling!.cacheSalt).not.toBe("t1");
    expect(off1.sampling!.cacheSalt).not.toBe(off2.sampling!.cacheSalt);
    // nothing else about the request changes
    expect({ ...off1.sampling, cacheSalt: null }).toEqual({ ...base.sampling!, cacheSalt: null });
  });
});

const TIMING_KEYS = ["cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"];

describe("timings_per_token: llama.cpp's timings object from the engine's timestamps", () => {
  test.each(cases("implemented").filter(([n]) => n === "timings_per_token"))("%s on %s", async (_name, endpoint) => {
    const off = await send(endpoint, BASE[endpoint]);
    expect(off.json.timings).toBeUndefined();
    const on = await send(endpoint, { ...BASE[endpoint], timings_per_token: true });
    expect(Object.keys(on.json.timings).sort()).toEqual([...TIMING_KEYS].sort());
    // the fake's prompt ("hi", or its chat lines) is all processed; four tokens generated
    expect(on.json.timings.prompt_n).toBe(on.prompt!.length);
    expect(on.json.timings.predicted_n).toBe(4);
    expect(on.json.timings.predicted_ms).toBeGreaterThanOrEqual(0);
    const s = testServer();
    const res = await s.call("POST", PATH[endpoint], { ...BASE[endpoint], stream: true, timings_per_token: true });
    const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)) as Json);
    // every chunk made from a generated token carries timings, its predicted_n counting up to 4
    const counted = events.filter((e) => e.timings !== undefined).map((e) => e.timings.predicted_n as number);
    expect(counted.at(-1)).toBe(4);
    expect(counted).toEqual([...counted].sort((a, b) => a - b));
    expect(counted.length).toBeGreaterThanOrEqual(4);
  });
});

describe("aliases: the engine request of the field aliased", () => {
  test.each(cases("alias"))("%s on %s", async (name, endpoint) => {
    const c = ALIASES[name]!;
    const body = Object.fromEntries(Object.entries(BASE[endpoint]).filter(([k]) => k !== c.drop));
    const base = await send(endpoint, body);
    const viaAlias = await send(endpoint, { ...body, [name]: c.value });
    const viaField = await send(endpoint, { ...body, ...c.same[endpoint] });
    expect(viaAlias.status).toBe(200);
    expect(viaField.status).toBe(200);
    expect({ sampling: { ...viaAlias.sampling, seed: null }, prompt: viaAlias.prompt }).toEqual({ sampling: { ...viaField.sampling!, seed: null }, prompt: viaField.prompt });
    if (c.changes) expect({ sampling: viaAlias.sampling, prompt: viaAlias.prompt }).not.toEqual({ sampling: base.sampling, prompt: base.prompt });
    const conflict = await send(endpoint, { ...body, ...c.conflict[endpoint], [name]: c.value });
    expect([conflict.status, conflict.param]).toEqual([400, name]);
  });

  test("n_probs answers OpenAI's logprobs shape (what llama.cpp's OpenAI routes return)", async () => {
    const chat = await send("chat", { ...BASE.chat, n_probs: 2 });
    expect(chat.json.choices[0].logprobs.content[0].top_logprobs).toHaveLength(2);
    const text = await send("completions", { ...BASE.completions, n_probs: 2 });
    expect(Object.keys(text.json.choices[0].logprobs.top_logprobs[0])).toHaveLength(2);
  });

  test("n_predict -1 is no limit: the rest of the context, on completions too (not their default 16)", async () => {
    const got = await send("completions", { prompt: "hi", n_predict: -1 });
    const unset = await send("completions", { prompt: "hi" });
    expect(unset.sampling!.maxTokens).toBe(16);
    expect(got.sampling!.maxTokens).toBeGreaterThan(16);
    expect([(await send("completions", { prompt: "hi", n_predict: 0 })).param, (await send("completions", { prompt: "hi", n_predict: -2 })).param]).toEqual(["n_predict", "n_predict"]);
  });

  test("reasoning {effort: none} turns thinking off exactly like reasoning_effort none; think true turns it on", async () => {
    const text = (r: Awaited<ReturnType<typeof send>>) => String.fromCharCode(...r.prompt!.map((id) => id - 3));
    expect(text(await send("chat", { ...BASE.chat, reasoning: { effort: "none" } }))).toContain("|thinking=false|effort=none");
    expect(text(await send("chat", { ...BASE.chat, think: true }))).toContain("|thinking=true|");
    expect(text(await send("chat", { ...BASE.chat, think: "high" }))).toContain("|effort=high");
    expect((await send("chat", { ...BASE.chat, reasoning: { effort: "low", summary: "auto" } })).param).toBe("reasoning");
  });
});

describe("refused: a 400 naming the field, its inert value passes", () => {
  test.each(cases("refused"))("%s on %s", async (name, endpoint) => {
    const c = REFUSED[name]!;
    const got = await send(endpoint, { ...BASE[endpoint], [name]: c.value });
    expect([got.status, got.param]).toEqual([400, name]);
    expect(got.json.error.message).toContain(name);
    const inert = await send(endpoint, { ...BASE[endpoint], [name]: c.inert });
    expect(inert.status).toBe(200);
  });
});

describe("unknown fields", () => {
  test.each(["chat", "completions"] as const)("%s: answered, and vLLM's line logged once naming them", async (endpoint: Endpoint) => {
    const e = endpoint as "chat" | "completions";
    const got = await send(e, { ...BASE[e], foo: 1, bar_baz: "x" });
    expect(got.status).toBe(200);
    const lines = got.logs.filter((l) => l.includes("present in the request but ignored"));
    // vLLM's line, at vLLM's level (DEBUG in its current OpenAIBaseModel)
    expect(lines).toEqual(["DEBUG The following fields were present in the request but ignored: {'foo', 'bar_baz'}"]);
    const known = await send(e, { ...BASE[e], temperature: 0.5, xtc_probability: 0.1 });
    expect(known.logs.filter((l) => l.includes("ignored:"))).toEqual([]);
  });
});
