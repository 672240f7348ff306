/**
 * The Anthropic Messages API for real: the server as a process (the compiled binary when it is built from the
 * current sources) on random-weight models of real shapes with their real tokenizers and templates, guarded by
 * --api-key, and the clients people use: the official @anthropic-ai/sdk (messages.create, .stream(), countTokens,
 * its typed errors), LangChain.js (@langchain/anthropic) and the Vercel AI SDK (@ai-sdk/anthropic), plus Claude Code
 * itself (`claude -p`: a plain turn, and a turn with a forced Bash call it runs and answers). A random model never
 * decides to call a tool, so tool turns force one (tool_choice tool / any: grammar-constrained), and every forced call
 * must validate against its tool's schema (ajv). Raw streams are checked record by record against Anthropic's
 * published event schemas (test/helpers/anthropic-events.ts).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv from "ajv";
import Anthropic from "@anthropic-ai/sdk";
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage } from "@langchain/core/messages";
import { generateText, jsonSchema, streamText, tool } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { checkMessageStream, foldMessageStream } from "../helpers/anthropic-events.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(240_000);

const KEY = "sekret-anthropic";
const MODEL = "fennec-tiny";
const WEATHER_SCHEMA = {
  type: "object" as const,
  properties: { city: { type: "string" as const, enum: ["Paris", "Lyon", "Rome"] }, days: { type: "integer" as const, minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const TOOLS = [{ name: "get_weather", description: "Weather in a city", input_schema: WEATHER_SCHEMA }];
const validWeather = new Ajv().compile(WEATHER_SCHEMA);
const ASK = [{ role: "user" as const, content: "What is the weather in Paris for 3 days?" }];

let server: ServerProcess;
let thinker: ServerProcess;
let client: Anthropic;

beforeAll(async () => {
  const [modelPath, qwen3Path] = await Promise.all([makeModelFile("tiny-qwen2.5-0.5b", "q8_0", 1, ["--context", "65536"]), makeModelFile("tiny-qwen3-0.6b", "q8_0", 1)]);
  [server, thinker] = await Promise.all([
    startServer([
      "--model", modelPath, "--served-model-name", MODEL, "--api-key", KEY, "--threads", "2", "--max-model-len", "32768",
      "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--chat-template", llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"),
      "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
    ]),
    startServer(["--model", qwen3Path, "--served-model-name", MODEL, "--threads", "1", "--max-model-len", "2048", "--reasoning-parser", "qwen3", "--chat-template", llamaTemplatePath("Qwen3.5-4B")]),
  ]);
  client = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
});

afterAll(async () => {
  await Promise.all([server?.stop(), thinker?.stop()]);
});

function toolUses(content: readonly Anthropic.ContentBlock[]): Anthropic.ToolUseBlock[] {
  return content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
}

describe("@anthropic-ai/sdk", () => {
  test("messages.create: a forced tool call validates against its schema; stop_reason tool_use", async () => {
    for (let seed = 0; seed < 3; seed++) {
      const m = await client.messages.create({ model: MODEL, max_tokens: 64, messages: ASK, tools: TOOLS, tool_choice: { type: "tool", name: "get_weather" } });
      const [call] = toolUses(m.content);
      expect(call?.name).toBe("get_weather");
      expect(validWeather(call!.input)).toBe(true);
      expect(m.stop_reason).toBe("tool_use");
      expect(m.usage.input_tokens).toBeGreaterThan(10);
    }
  });

  test(".stream(): the SDK assembles the same valid call from input_json_delta events", async () => {
    // tool_choice any lets the model write several calls: room for a few
    const stream = client.messages.stream({ model: MODEL, max_tokens: 320, messages: ASK, tools: TOOLS, tool_choice: { type: "any" } });
    const seen = new Set<string>();
    stream.on("streamEvent", (e) => seen.add(e.type));
    const m = await stream.finalMessage();
    const [call] = toolUses(m.content);
    expect(validWeather(call!.input)).toBe(true);
    // (a random model may go on writing calls until max_tokens; the first one is complete either way)
    expect(["tool_use", "max_tokens"]).toContain(m.stop_reason!);
    expect([...seen]).toEqual(expect.arrayContaining(["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]));
  });

  test("two turns: the tool_result goes back, the answer is text; countTokens matches the prompt", async () => {
    const first = await client.messages.create({ model: MODEL, max_tokens: 64, messages: ASK, tools: TOOLS, tool_choice: { type: "tool", name: "get_weather" } });
    const call = toolUses(first.content)[0]!;
    const messages: Anthropic.MessageParam[] = [
      ...ASK, { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: '{"temperature_c": 21}' }] },
    ];
    const second = await client.messages.create({ model: MODEL, max_tokens: 8, messages, tools: TOOLS, tool_choice: { type: "none" } });
    expect(second.content[0]!.type).toBe("text");
    expect(second.stop_reason).toBe("max_tokens");
    expect(second.usage.output_tokens).toBe(8);
    // Anthropic counts prompt tokens read from the (prefix) cache apart from input_tokens
    const promptTokens = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
    expect(promptTokens(second.usage)).toBeGreaterThan(promptTokens(first.usage) + 5);
    const counted = await client.messages.countTokens({ model: MODEL, messages, tools: TOOLS, tool_choice: { type: "none" } });
    expect(counted.input_tokens).toBe(promptTokens(second.usage));
  });

  test("typed errors: BadRequestError, NotFoundError, AuthenticationError, each with Anthropic's error body", async () => {
    const bad = await client.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }] }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(Anthropic.BadRequestError);
    expect((bad as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect((bad as Error).message).toContain("image");
    expect(await client.messages.create({ model: "claude-opus-4", max_tokens: 8, messages: ASK }).catch((e: unknown) => e)).toBeInstanceOf(Anthropic.NotFoundError);
    const stranger = new Anthropic({ baseURL: server.url, apiKey: "wrong", maxRetries: 0 });
    expect(await stranger.messages.create({ model: MODEL, max_tokens: 8, messages: ASK }).catch((e: unknown) => e)).toBeInstanceOf(Anthropic.AuthenticationError);
  });

  test("thinking with budget_tokens: a thinking block within the budget, then the answer (--reasoning-parser qwen3)", async () => {
    const thinking = new Anthropic({ baseURL: thinker.url, apiKey: "none", maxRetries: 0 });
    const stream = thinking.messages.stream({ model: MODEL, max_tokens: 1034, messages: ASK, thinking: { type: "enabled", budget_tokens: 1024 } });
    const m = await stream.finalMessage();
    // a random model never closes its reasoning by itself: without the budget all 1034 tokens would be thinking;
    // with it, the reasoning is closed after 1024 and the last tokens are the answer
    expect(m.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    expect((m.content[0] as Anthropic.ThinkingBlock).thinking.length).toBeGreaterThan(0);
    expect((m.content[1] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    expect(m.usage.output_tokens).toBeLessThanOrEqual(1034);
    expect(["end_turn", "max_tokens"]).toContain(m.stop_reason!);
  });
});

describe("raw streams against the published event schemas", () => {
  const post = (body: unknown) => fetch(`${server.url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });

  test("text and forced tool streams, event by event", async () => {
    const text = foldMessageStream(checkMessageStream(await (await post({ model: MODEL, max_tokens: 12, stream: true, messages: ASK })).text()));
    expect(text.blocks.map((b) => b.type)).toEqual(["text"]);
    expect(text.stop.stop_reason).toBe("max_tokens");
    expect(text.outputTokens).toBe(12);
    const forced = foldMessageStream(checkMessageStream(await (await post({ model: MODEL, max_tokens: 64, stream: true, messages: ASK, tools: TOOLS, tool_choice: { type: "tool", name: "get_weather" } })).text()));
    expect(forced.blocks.map((b) => b.type)).toEqual(["tool_use"]);
    expect(validWeather(JSON.parse(forced.blocks[0]!.partial_json))).toBe(true);
  });

  test("an error before the stream starts is Anthropic's JSON error, not an event", async () => {
    const res = await post({ model: MODEL, stream: true, messages: ASK });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required" } });
  });
});

describe("observability", () => {
  /** the sum of a series' samples whose labels contain every `labels` piece */
  async function sample(name: string, labels: readonly string[] = []): Promise<number> {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    return text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `)).filter((l) => labels.every((p) => l.includes(p)))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
  }

  test("each Messages request counts once in /metrics, as the HTTP handler /v1/messages and as one engine request", async () => {
    const http = () => sample("http_requests_total", ['handler="/v1/messages"', 'method="POST"']);
    const [httpBefore, successBefore] = [await http(), await sample("vllm:request_success_total")];
    await client.messages.create({ model: MODEL, max_tokens: 4, messages: ASK });
    await client.messages.stream({ model: MODEL, max_tokens: 4, messages: ASK }).finalMessage();
    // the HTTP middleware counts after the response is out
    await Bun.sleep(200);
    expect(await http()).toBe(httpBefore + 2);
    expect(await sample("vllm:request_success_total")).toBe(successBefore + 2);
  });
});

describe("@langchain/anthropic", () => {
  test("ChatAnthropic.bindTools with a forced tool, then a plain invoke", async () => {
    const llm = new ChatAnthropic({ model: MODEL, apiKey: KEY, anthropicApiUrl: server.url, maxTokens: 64, temperature: 1, maxRetries: 0 });
    const ai = await llm.bindTools([{ name: "get_weather", description: "Weather in a city", input_schema: WEATHER_SCHEMA }], { tool_choice: "get_weather" }).invoke([new HumanMessage(ASK[0]!.content)]);
    expect(ai.tool_calls).toHaveLength(1);
    expect(ai.tool_calls![0]!.name).toBe("get_weather");
    expect(validWeather(ai.tool_calls![0]!.args)).toBe(true);
    const plain = await new ChatAnthropic({ model: MODEL, apiKey: KEY, anthropicApiUrl: server.url, maxTokens: 6, maxRetries: 0 }).invoke("Hello");
    expect(typeof plain.content).toBe("string");
    expect(plain.usage_metadata?.output_tokens).toBe(6);
  });
});

describe("@ai-sdk/anthropic (Vercel AI SDK)", () => {
  const anthropic = () => createAnthropic({ baseURL: `${server.url}/v1`, apiKey: KEY });
  const weather = tool({ description: "Weather in a city", inputSchema: jsonSchema(WEATHER_SCHEMA) });

  test("generateText with a forced tool; streamText of plain text", async () => {
    const r = await generateText({ model: anthropic()(MODEL), prompt: ASK[0]!.content, tools: { get_weather: weather }, toolChoice: { type: "tool", toolName: "get_weather" }, maxOutputTokens: 64, maxRetries: 0 });
    expect(r.toolCalls).toHaveLength(1);
    expect(r.toolCalls[0]!.toolName).toBe("get_weather");
    expect(validWeather(r.toolCalls[0]!.input)).toBe(true);
    const s = streamText({ model: anthropic()(MODEL), prompt: "Hello", maxOutputTokens: 7, maxRetries: 0 });
    expect(typeof (await s.text)).toBe("string");
    expect((await s.usage).outputTokens).toBe(7);
    expect(await s.finishReason).toBe("length");
  });
});

/**
 * Claude Code (`claude -p`, @anthropic-ai/claude-code) against fennec, through a recording proxy: every request it
 * sends and every answer it gets are kept, and each streamed answer is checked against the event schemas. A random
 * model never ends its turn by itself (it runs into max_tokens, which Claude Code reports as an error), so the proxy
 * adds one field to each Messages request: output_config.format with a one-answer JSON schema, which the server
 * enforces with its grammar, so the model is forced to a short answer and an end_turn. Everything else is exactly
 * what Claude Code sent (system prompt, tools, thinking, context_management, metadata, betas).
 */
/** `claude` with its own HOME, talking to fennec through the test's proxy on `port`; killed after 3 minutes. */
async function runClaude(args: readonly string[], cwd: string, home: string, port: number): Promise<{ stdout: string; stderr: string; code: number }> {
  const child = Bun.spawn([join(import.meta.dir, "..", "..", "node_modules", ".bin", "claude"), ...args], {
    cwd, stdout: "pipe", stderr: "pipe", stdin: "ignore",
    env: {
      PATH: process.env.PATH ?? "", HOME: home, ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`, ANTHROPIC_API_KEY: KEY,
      ANTHROPIC_SMALL_FAST_MODEL: MODEL, CLAUDE_CODE_MAX_OUTPUT_TOKENS: "256",
      DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    },
  });
  const timer = setTimeout(() => child.kill(), 180_000);
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  clearTimeout(timer);
  return { stdout, stderr, code };
}

describe("Claude Code", () => {
  const ANSWER = { type: "object", properties: { answer: { enum: ["Hello from fennec"] } }, required: ["answer"], additionalProperties: false };

  test("claude -p completes one headless turn", async () => {
    const exchanges: { path: string; headers: Record<string, string>; body: Record<string, unknown> | null; status: number; answer: string }[] = [];
    const proxy = Bun.serve({
      hostname: "127.0.0.1", port: 0, idleTimeout: 0,
      async fetch(request) {
        const url = new URL(request.url);
        const text = await request.text();
        const body = text === "" ? null : JSON.parse(text) as Record<string, unknown>;
        const forced = body !== null && url.pathname === "/v1/messages" ? { ...body, output_config: { ...(body.output_config as object | undefined), format: { type: "json_schema", schema: ANSWER } } } : body;
        const headers = new Headers(request.headers);
        headers.delete("content-length");
        headers.delete("accept-encoding");
        const res = await fetch(`${server.url}${url.pathname}${url.search}`, { method: request.method, headers, body: forced === null ? undefined : JSON.stringify(forced) });
        const answer = await res.text();
        exchanges.push({ path: url.pathname, headers: request.headers.toJSON(), body, status: res.status, answer });
        return new Response(answer, { status: res.status, headers: { "content-type": res.headers.get("content-type") ?? "application/json" } });
      },
    });
    const home = mkdtempSync(join(tmpdir(), "fennec-claude-home-"));
    try {
      const { stdout, stderr, code } = await runClaude(["-p", "Say hello.", "--model", MODEL], home, home, proxy.port!);
      expect({ code, stdout, stderr: stderr.slice(0, 2000) }).toMatchObject({ code: 0 });
      expect(stdout).toContain("Hello from fennec");
      const messages = exchanges.filter((e) => e.path === "/v1/messages");
      expect(messages.length).toBeGreaterThanOrEqual(1);
      for (const e of messages) {
        expect(e.status).toBe(200);
        // Claude Code authenticates with x-api-key and names the API version
        expect(e.headers["x-api-key"]).toBe(KEY);
        expect(e.headers["anthropic-version"]).toBe("2023-06-01");
        if (e.body?.stream === true) expect(foldMessageStream(checkMessageStream(e.answer)).stop.stop_reason).toBe("end_turn");
      }
      // the main turn: Claude Code's big system prompt and its tools reached the model
      const main = messages.find((e) => Array.isArray(e.body?.tools) && (e.body!.tools as unknown[]).length > 3)!;
      expect(main).toBeDefined();
      expect(JSON.stringify(main.body!.system).length).toBeGreaterThan(2000);
    } finally {
      proxy.stop(true);
      rmSync(home, { recursive: true, force: true });
    }
  });

  /*
   * A tool round trip. Random weights never choose a tool under tool_choice auto, so the proxy changes the FIRST
   * main-turn request only (the first one that offers Claude Code's Bash tool): tool_choice is forced to Bash, and
   * in that request's tools list Bash's input_schema is narrowed to one harmless input, {"command": "ls"} (the
   * grammar-forced arguments of a random model would otherwise be a random shell command, or a string that never
   * closes); thinking, if Claude Code asked for it, is dropped from that one request, as Anthropic's API (and fennec)
   * refuse thinking with a forced tool. Claude Code runs `ls` itself (allowed by --allowedTools "Bash(ls)"), sends the
   * tool_result back, and every later request gets the same output_config.format as above so the turn ends.
   */
  test("claude -p with a forced tool call: Claude Code runs Bash ls, sends the tool_result back, fennec answers", async () => {
    const LS_ONLY = { type: "object", properties: { command: { type: "string", enum: ["ls"] } }, required: ["command"], additionalProperties: false };
    const exchanges: { path: string; body: Record<string, any> | null; forced: boolean; status: number; answer: string }[] = [];
    let forcedOnce = false;
    const proxy = Bun.serve({
      hostname: "127.0.0.1", port: 0, idleTimeout: 0,
      async fetch(request) {
        const url = new URL(request.url);
        const text = await request.text();
        const body = text === "" ? null : JSON.parse(text) as Record<string, any>;
        let sent = body;
        let forced = false;
        if (body !== null && url.pathname === "/v1/messages") {
          const offersBash = Array.isArray(body.tools) && (body.tools as { name?: string }[]).some((t) => t.name === "Bash");
          if (offersBash && !forcedOnce) {
            forcedOnce = forced = true;
            const tools = (body.tools as Record<string, unknown>[]).map((t) => (t.name === "Bash" ? { ...t, input_schema: LS_ONLY } : t));
            const { thinking: _thinking, ...rest } = body;
            sent = { ...rest, tools, tool_choice: { type: "tool", name: "Bash" } };
          } else {
            sent = { ...body, output_config: { ...(body.output_config as object | undefined), format: { type: "json_schema", schema: ANSWER } } };
          }
        }
        const headers = new Headers(request.headers);
        headers.delete("content-length");
        headers.delete("accept-encoding");
        const res = await fetch(`${server.url}${url.pathname}${url.search}`, { method: request.method, headers, body: sent === null ? undefined : JSON.stringify(sent) });
        const answer = await res.text();
        exchanges.push({ path: url.pathname, body, forced, status: res.status, answer });
        return new Response(answer, { status: res.status, headers: { "content-type": res.headers.get("content-type") ?? "application/json" } });
      },
    });
    const home = mkdtempSync(join(tmpdir(), "fennec-claude-home-"));
    const work = mkdtempSync(join(tmpdir(), "fennec-claude-work-"));
    writeFileSync(join(work, "notes.txt"), "fennec\n");
    try {
      const { stdout, stderr, code } = await runClaude(["-p", "List the files here.", "--model", MODEL, "--allowedTools", "Bash(ls)"], work, home, proxy.port!);
      const messages = exchanges.filter((e) => e.path === "/v1/messages");
      const trace = messages.map((e) => `${e.status} forced=${e.forced} ${e.answer.slice(0, 300)}`).join("\n");
      expect({ code, stdout, stderr: stderr.slice(0, 2000), trace }).toMatchObject({ code: 0 });
      expect(stdout).toContain("Hello from fennec");
      for (const e of messages) expect({ status: e.status, answer: e.answer.slice(0, 500) }).toMatchObject({ status: 200 });
      // the forced request: a streamed tool_use block, its input as input_json_delta, stop_reason tool_use
      const first = messages.findIndex((e) => e.forced);
      expect(first).toBeGreaterThanOrEqual(0);
      expect(messages[first]!.body!.stream).toBe(true);
      const events = checkMessageStream(messages[first]!.answer);
      expect(events.some((e) => e.type === "content_block_start" && e.content_block.type === "tool_use" && e.content_block.name === "Bash")).toBe(true);
      expect(events.some((e) => e.type === "content_block_delta" && e.delta.type === "input_json_delta")).toBe(true);
      const folded = foldMessageStream(events);
      expect(folded.stop.stop_reason).toBe("tool_use");
      const call = folded.blocks.find((b) => b.type === "tool_use")!;
      expect(JSON.parse(call.partial_json)).toEqual({ command: "ls" });
      // the next main-turn request carries the call and its tool_result with the same id, holding the real ls output
      const next = messages.slice(first + 1).find((e) => JSON.stringify(e.body?.messages ?? []).includes(call.id));
      expect(next).toBeDefined();
      const blocks = (next!.body!.messages as { role: string; content: unknown }[]).flatMap((m) => (Array.isArray(m.content) ? m.content as Record<string, any>[] : []));
      expect(blocks.find((b) => b.type === "tool_use")).toMatchObject({ id: call.id, name: "Bash", input: { command: "ls" } });
      const result = blocks.find((b) => b.type === "tool_result");
      expect(result).toMatchObject({ tool_use_id: call.id });
      expect(result!.is_error ?? false).toBe(false);
      expect(JSON.stringify(result!.content)).toContain("notes.txt");
      // fennec answered that turn: the forced JSON answer, end_turn
      expect(next!.body!.stream).toBe(true);
      expect(foldMessageStream(checkMessageStream(next!.answer)).stop.stop_reason).toBe("end_turn");
    } finally {
      proxy.stop(true);
      rmSync(home, { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
    }
  });
});
