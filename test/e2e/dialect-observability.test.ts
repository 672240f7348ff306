/**
 * The same observability for every dialect, against the server as a process (the compiled binary when it is built
 * from the current sources): each request of each dialect (OpenAI chat completions, the Responses API (background
 * runs too), Anthropic
 * Messages with and without a thinking budget, Ollama's /api/chat and /api/generate), streamed and not, moves every
 * per-request series of /metrics by exactly one request, with the token counts the dialect itself reported, writes
 * one access-log line, and shows in the web page's metrics view; every answer is checked against its dialect's schema (headless Chromium, as test/e2e/web-ui.test.ts).
 * A random-weight Qwen3 shape (one layer) with Qwen3's template and --reasoning-parser qwen3, so the thinking budget is
 * real: a random model never closes its reasoning, the engine forces the end at the budget (engine/thinking-budget.ts).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { checkMessageStream, foldMessageStream } from "../helpers/anthropic-events.ts";
import { checkEventStream } from "../server/responses-helpers.ts";
import { checkOllama, ndjsonRecords } from "../server/ollama-schemas.ts";
import type { Json } from "../server/helpers.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(240_000);

const MODEL = "fennec-tiny";
const CHROMIUM = "/usr/bin/chromium";
let server: ServerProcess;

beforeAll(async () => {
  const model = await makeModelFile("tiny-qwen3-0.6b", "q8_0", 1);
  server = await startServer(["--model", model, "--served-model-name", MODEL, "--threads", "2", "--max-model-len", "2048", "--reasoning-parser", "qwen3", "--chat-template", llamaTemplatePath("Qwen3.5-4B"), "--enable-per-request-metrics"]);
});

afterAll(async () => {
  await server?.stop();
});

/** Every sample of /metrics as `name{labels}` -> value. */
async function scrape(): Promise<Map<string, number>> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** The sum of the samples of `name` whose labels hold every piece of `labels`. */
function total(samples: Map<string, number>, name: string, labels: readonly string[] = []): number {
  let sum = 0;
  for (const [key, value] of samples) {
    const brace = key.indexOf("{");
    if ((brace < 0 ? key : key.slice(0, brace)) !== name) continue;
    if (labels.every((l) => key.includes(l))) sum += value;
  }
  return sum;
}

const post = (path: string, body: unknown) => fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });

/** The tokens a dialect reported for one request: prompt (cached ones included) and generated. */
interface Reported { readonly prompt: number; readonly generated: number }

/** SSE `data:` payloads (the OpenAI, Responses and Anthropic streams). */
const ssePayloads = (text: string): Json[] => text.split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]").map((l) => JSON.parse(l.slice(6)) as Json);
/** A Responses stream's events with their `event:` names checked. */
const responsesEvents = (text: string): Json[] => text.split("\n\n").filter((b) => b.trim() !== "").map((b) => JSON.parse(b.split("\n")[1]!.slice(6)) as Json);

const ASK = "Tell me about foxes.";
const CASES: readonly { readonly name: string; readonly path: string; readonly send: () => Promise<Reported> }[] = [
  { name: "chat completions", path: "/v1/chat/completions", send: async () => {
    const r = await (await post("/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: ASK }], max_tokens: 6, chat_template_kwargs: { enable_thinking: false } })).json() as Json;
    return { prompt: r.usage.prompt_tokens, generated: r.usage.completion_tokens };
  } },
  { name: "chat completions, streamed", path: "/v1/chat/completions", send: async () => {
    const events = ssePayloads(await (await post("/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: ASK }], max_tokens: 6, stream: true, stream_options: { include_usage: true }, chat_template_kwargs: { enable_thinking: false } })).text());
    const usage = events.at(-1)!.usage;
    return { prompt: usage.prompt_tokens, generated: usage.completion_tokens };
  } },
  { name: "Responses", path: "/v1/responses", send: async () => {
    const r = await (await post("/v1/responses", { model: MODEL, input: ASK, max_output_tokens: 6, store: false })).json() as Json;
    // the dialect's room for per-request metrics: vLLM's `metrics` object
    expect(r.metrics.time_to_first_token_ms).toBeGreaterThan(0);
    return { prompt: r.usage.input_tokens, generated: r.usage.output_tokens };
  } },
  { name: "Responses, streamed", path: "/v1/responses", send: async () => {
    const final = checkEventStream(responsesEvents(await (await post("/v1/responses", { model: MODEL, input: ASK, max_output_tokens: 6, stream: true, store: false })).text()));
    return { prompt: final.usage.input_tokens, generated: final.usage.output_tokens };
  } },
  { name: "Responses, background", path: "/v1/responses", send: async () => {
    let r = await (await post("/v1/responses", { model: MODEL, input: ASK, max_output_tokens: 6, background: true })).json() as Json;
    // the engine runs it after the answer: followed with GET (another route) until it ends
    for (let i = 0; i < 200 && (r.status === "queued" || r.status === "in_progress"); i++) {
      await Bun.sleep(25);
      r = await (await fetch(`${server.url}/v1/responses/${r.id}`)).json() as Json;
    }
    expect(r.status).toBe("incomplete");
    return { prompt: r.usage.input_tokens, generated: r.usage.output_tokens };
  } },
  { name: "Anthropic Messages", path: "/v1/messages", send: async () => {
    const r = await (await post("/v1/messages", { model: MODEL, max_tokens: 6, messages: [{ role: "user", content: ASK }] })).json() as Json;
    return { prompt: r.usage.input_tokens + r.usage.cache_read_input_tokens, generated: r.usage.output_tokens };
  } },
  { name: "Anthropic Messages, streamed", path: "/v1/messages", send: async () => {
    const m = foldMessageStream(checkMessageStream(await (await post("/v1/messages", { model: MODEL, max_tokens: 6, stream: true, messages: [{ role: "user", content: ASK }] })).text()));
    return { prompt: m.inputTokens + m.cacheReadInputTokens, generated: m.outputTokens };
  } },
  // greedy: a sampled random model may write its end of text inside the 1,024 thinking tokens (no text block then)
  { name: "Anthropic Messages with a thinking budget", path: "/v1/messages", send: async () => {
    const r = await (await post("/v1/messages", { model: MODEL, max_tokens: 1030, temperature: 0, thinking: { type: "enabled", budget_tokens: 1024 }, messages: [{ role: "user", content: ASK }] })).json() as Json;
    // the budget closed the reasoning inside the one engine request, and the answer followed
    expect(r.content.map((b: Json) => b.type)).toEqual(["thinking", "text"]);
    return { prompt: r.usage.input_tokens + r.usage.cache_read_input_tokens, generated: r.usage.output_tokens };
  } },
  { name: "Anthropic Messages with a thinking budget, streamed", path: "/v1/messages", send: async () => {
    const m = foldMessageStream(checkMessageStream(await (await post("/v1/messages", { model: MODEL, max_tokens: 1030, stream: true, temperature: 0, thinking: { type: "enabled", budget_tokens: 1024 }, messages: [{ role: "user", content: ASK }] })).text()));
    expect(m.blocks.map((b) => b.type)).toEqual(["thinking", "text"]);
    return { prompt: m.inputTokens + m.cacheReadInputTokens, generated: m.outputTokens };
  } },
  { name: "Ollama /api/chat", path: "/api/chat", send: async () => {
    const r = await (await post("/api/chat", { model: MODEL, messages: [{ role: "user", content: ASK }], think: false, stream: false, options: { num_predict: 6 } })).json() as Json;
    checkOllama("chat", r);
    return { prompt: r.prompt_eval_count, generated: r.eval_count };
  } },
  { name: "Ollama /api/chat, streamed", path: "/api/chat", send: async () => {
    const records = await ndjsonRecords(await post("/api/chat", { model: MODEL, messages: [{ role: "user", content: ASK }], think: false, options: { num_predict: 6 } }), "chat");
    const done = records.at(-1)!;
    return { prompt: done.prompt_eval_count, generated: done.eval_count };
  } },
  { name: "Ollama /api/generate", path: "/api/generate", send: async () => {
    const r = await (await post("/api/generate", { model: MODEL, prompt: ASK, think: false, stream: false, options: { num_predict: 6 } })).json() as Json;
    checkOllama("generate", r);
    return { prompt: r.prompt_eval_count, generated: r.eval_count };
  } },
  { name: "Ollama /api/generate, streamed", path: "/api/generate", send: async () => {
    const records = await ndjsonRecords(await post("/api/generate", { model: MODEL, prompt: ASK, think: false, options: { num_predict: 6 } }), "generate");
    const done = records.at(-1)!;
    return { prompt: done.prompt_eval_count, generated: done.eval_count };
  } },
];

/** The per-request series: each finished request adds exactly one observation (or one count) to each. */
const ONE_EACH = [
  "vllm:request_success_total", "vllm:e2e_request_latency_seconds_count", "vllm:time_to_first_token_seconds_count",
  "vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count", "vllm:request_decode_time_seconds_count",
  "vllm:request_inference_time_seconds_count", "vllm:request_prompt_tokens_count", "vllm:request_generation_tokens_count",
  "vllm:request_params_n_count", "vllm:request_time_per_output_token_seconds_count",
];

describe("each request of each dialect counts once in /metrics", () => {
  for (const c of CASES) {
    test(c.name, async () => {
      const before = await scrape();
      const logLines = (server.log().match(new RegExp(`"POST ${c.path} HTTP/1\\.1" 200`, "g")) ?? []).length;
      const reported = await c.send();
      const http = (s: Map<string, number>) => total(s, "http_requests_total", [`handler="${c.path}"`, 'method="POST"', 'status="2xx"']);
      // the HTTP middleware counts once the response is out
      let after = await scrape();
      for (let i = 0; i < 40 && http(after) === http(before); i++) {
        await Bun.sleep(50);
        after = await scrape();
      }
      expect(http(after) - http(before)).toBe(1);
      const moved = Object.fromEntries(ONE_EACH.map((name) => [name, total(after, name) - total(before, name)]));
      expect(moved).toEqual(Object.fromEntries(ONE_EACH.map((name) => [name, 1])));
      // the same labels whatever the dialect: the one series that moved is the served model's
      const movedSeries = [...after.keys()].filter((k) => k.startsWith("vllm:request_success_total{") && after.get(k) !== (before.get(k) ?? 0));
      expect(movedSeries).toHaveLength(1);
      expect(movedSeries[0]).toMatch(new RegExp(`^vllm:request_success_total\\{model_name="${MODEL}",engine="0",finished_reason="(length|stop)"\\}$`));
      // the tokens the dialect reported are the ones /metrics counted
      expect(total(after, "vllm:request_prompt_tokens_sum") - total(before, "vllm:request_prompt_tokens_sum")).toBe(reported.prompt);
      expect(total(after, "vllm:prompt_tokens_total") - total(before, "vllm:prompt_tokens_total")).toBe(reported.prompt);
      expect(total(after, "vllm:request_generation_tokens_sum") - total(before, "vllm:request_generation_tokens_sum")).toBe(reported.generated);
      expect(total(after, "vllm:generation_tokens_total") - total(before, "vllm:generation_tokens_total")).toBe(reported.generated);
      // one access-log line
      await Bun.sleep(50);
      expect((server.log().match(new RegExp(`"POST ${c.path} HTTP/1\\.1" 200`, "g")) ?? []).length - logLines).toBe(1);
    });
  }
});

describe("the web page's metrics view", () => {
  let browser: Browser;
  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-test-deps.sh (apt-get install chromium)`);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  test("shows the requests of every dialect: the finished count and one row per route", async () => {
    const page = await browser.newPage({ viewport: { width: 900, height: 900 } });
    await page.goto(`${server.url}/#metrics`);
    await page.locator("#m-requests").waitFor();
    const finished = async () => Number(await page.locator("#m-requests .v").innerText());
    const row = (path: string) => page.locator(`#endpoint-table tr[data-handler="${path}"] td`);
    const answered = async (path: string) => ((await row(path).count()) === 0 ? 0 : Number(await row(path).nth(2).innerText()));
    const start = await finished();
    const paths = [...new Set(CASES.map((c) => c.path))];
    const startRows = Object.fromEntries(await Promise.all(paths.map(async (p) => [p, await answered(p)] as const)));
    // one plain request of each dialect (the thinking-budget cases are long: left out here)
    const quick = CASES.filter((c) => !c.name.includes("thinking"));
    for (const c of quick) await c.send();
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (await finished()) < start + quick.length) await Bun.sleep(200);
    expect(await finished()).toBe(start + quick.length);
    for (const p of paths) {
      const expected = startRows[p]! + quick.filter((c) => c.path === p).length;
      while (Date.now() < deadline && (await answered(p)) < expected) await Bun.sleep(200);
      expect(await answered(p)).toBe(expected);
    }
    expect(await row("/v1/messages").first().innerText()).toBe("Anthropic Messages");
    expect(await row("/api/chat").first().innerText()).toBe("Ollama");
    expect(await row("/v1/responses").first().innerText()).toBe("OpenAI Responses");
    expect(await row("/v1/chat/completions").first().innerText()).toBe("OpenAI / vLLM");
    await page.close();
  });
});
