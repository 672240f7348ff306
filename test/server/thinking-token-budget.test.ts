/**
 * vLLM's thinking_token_budget on /v1/chat/completions and /v1/completions, through the app (no port) on a real engine
 * (a random tiny Qwen3 with Qwen3's vocabulary, --reasoning-parser qwen3): a random model never closes its reasoning
 * by itself, so without the budget every token is reasoning; with it, the reasoning holds at most the budget's tokens
 * (counted from the reasoning's start: the prompt's when the template opened it, else the model's own `<think>`), then
 * `</think>` is forced and the answer follows. vLLM's 400s for a bad value and for a server without a parser.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { Orchestrator } from "../../src/frontend/orchestrator.ts";
import { createApp } from "../../src/server/app.ts";
import { DEFAULT_CHAT_SERVING } from "../../src/server/chat-serving.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../../src/server/server-options.ts";
import { llamaTemplatePath, llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { MODEL_SHAPES } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readSse, type Json } from "./helpers.ts";

setDefaultTimeout(240_000);

const dir = mkdtempSync(join(tmpdir(), "fennec-thinking-budget-"));
let orchestrator: Orchestrator;
type Post = (path: string, body: unknown) => Promise<{ status: number; json: Record<string, any> }>;
let thinker: Post;
let thinkerApp: ReturnType<typeof createApp>;
let plain: Post;

function appPost(app: ReturnType<typeof createApp>): Post {
  return async (path, body) => {
    const response = await app.handle(new Request(`http://localhost${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
    return { status: response.status, json: await response.json() as Record<string, any> };
  };
}

beforeAll(async () => {
  const shape = { ...MODEL_SHAPES["tiny-qwen3-0.6b"]!, numLayers: 1 };
  const vocab = readGguf(llamaVocabPath(shape.vocab));
  if (!vocab.ok) throw new Error(vocab.error);
  const path = join(dir, "qwen3.gguf");
  writeGgufFile(path, randomModel({ shapeName: "tiny-qwen3-0.6b", shape, type: "q8_0", seed: 3, vocab: vocab.value }));
  orchestrator = await createEngineFrontend({
    modelPath: path,
    engineArgs: { maxNumSeqs: 8, maxNumBatchedTokens: 512, maxModelLen: 1024, blockSize: 16, kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: 1, device: "cpu" },
  });
  const base = {
    orchestrator, servedModelName: "m", modelPath: path, apiKey: null, enablePerRequestMetrics: false,
    forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: new AbortController().signal, log: () => {},
  };
  // Qwen3.5's template opens the think block in the prompt; the model's own <think> is tried on /v1/completions
  const chatTemplate = readFileSync(llamaTemplatePath("Qwen3.5-4B"), "utf8");
  thinkerApp = createApp({ ...base, chat: { ...DEFAULT_CHAT_SERVING, reasoningParser: "qwen3", chatTemplate } });
  thinker = appPost(thinkerApp);
  plain = appPost(createApp({ ...base, chat: { ...DEFAULT_CHAT_SERVING, chatTemplate } }));
});

afterAll(async () => {
  await orchestrator?.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

const ASK = [{ role: "user", content: "What is the weather in Paris?" }];
const END = () => orchestrator.tokenizer.encode("</think>", { addSpecial: false, parseSpecial: true });
const START = () => orchestrator.tokenizer.encode("<think>", { addSpecial: false, parseSpecial: true });
const tokens = (text: string) => orchestrator.tokenizer.encode(text, { addSpecial: false, parseSpecial: true }).length;

describe("thinking_token_budget on chat completions", () => {
  test("without a budget the random model reasons to max_tokens; with one, the reasoning closes at the budget and content follows", async () => {
    const free = await thinker("/v1/chat/completions", { messages: ASK, max_tokens: 40, temperature: 0, ignore_eos: true, return_token_ids: true });
    expect(free.status).toBe(200);
    expect(free.json.choices[0].token_ids).not.toContain(END()[0]);
    expect(free.json.choices[0].message.content).toBeNull();

    for (const budget of [0, 5, 12]) {
      const r = await thinker("/v1/chat/completions", { messages: ASK, max_tokens: 40, temperature: 0, ignore_eos: true, return_token_ids: true, thinking_token_budget: budget });
      expect(r.status).toBe(200);
      const ids: number[] = r.json.choices[0].token_ids;
      // the prompt opened the reasoning: the count starts with the output, and </think> comes right at the budget
      expect(ids.indexOf(END()[0]!)).toBe(budget);
      expect(ids.slice(0, budget)).toEqual(free.json.choices[0].token_ids.slice(0, budget));
      const { reasoning, content } = r.json.choices[0].message;
      expect(tokens(reasoning ?? "")).toBeLessThanOrEqual(budget + 1);
      expect(typeof content).toBe("string");
      expect(content.length).toBeGreaterThan(0);
      expect(r.json.usage.completion_tokens).toBe(40);
    }
  });

  test("streamed: reasoning deltas up to the budget, then content deltas", async () => {
    const response = await thinkerApp.handle(new Request("http://localhost/v1/chat/completions", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: ASK, max_tokens: 30, temperature: 0, ignore_eos: true, stream: true, thinking_token_budget: 6 }),
    }));
    expect(response.status).toBe(200);
    const chunks = (await readSse(response)) as Json[];
    const deltas = chunks.flatMap((c) => (c.choices ?? []).map((choice: Json) => choice.delta as Json));
    const kinds = deltas.map((d) => (typeof d.reasoning === "string" && d.reasoning !== "" ? "reasoning" : typeof d.content === "string" && d.content !== "" ? "content" : "other")).filter((k) => k !== "other");
    const firstContent = kinds.indexOf("content");
    expect(firstContent).toBeGreaterThan(0);
    // never back to reasoning once the content started
    expect(kinds.slice(firstContent).every((k) => k === "content")).toBe(true);
    const reasoning = deltas.map((d) => d.reasoning ?? "").join("");
    expect(tokens(reasoning)).toBeLessThanOrEqual(6 + 1);
  });

  test("a prompt whose template closed the reasoning (enable_thinking false) is not forced", async () => {
    const body = { messages: ASK, max_tokens: 16, temperature: 0, ignore_eos: true, return_token_ids: true, chat_template_kwargs: { enable_thinking: false } };
    const free = await thinker("/v1/chat/completions", body);
    const budgeted = await thinker("/v1/chat/completions", { ...body, thinking_token_budget: 0 });
    expect(budgeted.status).toBe(200);
    expect(budgeted.json.choices[0].token_ids).toEqual(free.json.choices[0].token_ids);
  });

  test("-1 is unlimited; vLLM's 400s for a bad value and for a server without a reasoning parser", async () => {
    const unlimited = await thinker("/v1/chat/completions", { messages: ASK, max_tokens: 8, temperature: 0, ignore_eos: true, thinking_token_budget: -1 });
    expect(unlimited.status).toBe(200);
    expect(unlimited.json.choices[0].message.content).toBeNull();
    for (const bad of [-2, 1.5]) {
      const r = await thinker("/v1/chat/completions", { messages: ASK, max_tokens: 8, thinking_token_budget: bad });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain(bad === -2 ? "`thinking_token_budget` must be a non-negative integer or -1 for unlimited." : "thinking_token_budget");
    }
    const none = await plain("/v1/chat/completions", { messages: ASK, max_tokens: 8, thinking_token_budget: 4 });
    expect(none.status).toBe(400);
    expect(none.json.error.message).toBe("thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser and/or --reasoning-config to use thinking_token_budget.");
  });
});

describe("thinking_token_budget on completions", () => {
  test("counted from the reasoning's start: a prompt that opens <think> is budgeted from the output's first token", async () => {
    const r = await thinker("/v1/completions", { prompt: "Weather? <think>", max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true, thinking_token_budget: 3 });
    expect(r.status).toBe(200);
    expect(r.json.choices[0].token_ids.indexOf(END()[0]!)).toBe(3);
  });

  test("a prompt outside the reasoning is not forced until the model opens it (vLLM's in_think)", async () => {
    const closed = await thinker("/v1/completions", { prompt: "Weather? <think>x</think>", max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true });
    const budgeted = await thinker("/v1/completions", { prompt: "Weather? <think>x</think>", max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true, thinking_token_budget: 0 });
    const ids: number[] = closed.json.choices[0].token_ids;
    const start = ids.indexOf(START()[0]!);
    if (start < 0) {
      // the model never opened a block: nothing forced, the same tokens
      expect(budgeted.json.choices[0].token_ids).toEqual(ids);
    } else {
      // budget 0: the end right after the model's own start
      expect(budgeted.json.choices[0].token_ids[start + 1]).toBe(END()[0]);
    }
  });
});
