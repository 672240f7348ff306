/**
 * The Responses API for real: the server as a process (the compiled binary when it is built from the current
 * sources), a random-weight model of Qwen2.5's shape and vocabulary (make-model, one layer, 32k context) with
 * Qwen2.5's real chat template, `--tool-call-parser hermes`, and the clients that speak /v1/responses: the official
 * openai SDK (`client.responses`), the AI SDK's default OpenAI provider (@ai-sdk/openai, which uses the Responses
 * API) and the Codex CLI (`codex exec` with a custom provider, wire_api = "responses", through a recording proxy that
 * forces its first turn's shell call). A random model never decides
 * to call a tool, so tool turns force one (tool_choice named: grammar-constrained). Every stream is checked event by
 * event (test/server/responses-helpers.ts). Codex sends no max_output_tokens: --override-generation-config's
 * max_new_tokens bounds its turn, which also shows the server defaults reach this endpoint.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv from "ajv";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, streamText, tool } from "ai";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { checkEventStream } from "../server/responses-helpers.ts";
import { ResponsesRequest } from "../../src/server/openai/responses/request-schema.ts";
import type { Json } from "../server/helpers.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(180_000);

const MODEL = "fennec-tiny";
const WEATHER_PARAMS = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Lyon", "Rome"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
} as const;
const TOOLS = [{ type: "function" as const, name: "get_weather", description: "Weather in a city", parameters: WEATHER_PARAMS, strict: true }];
const validWeather = new Ajv().compile(WEATHER_PARAMS);
const MAX_NEW_TOKENS = 24;

let server: ServerProcess;
let client: OpenAI;

beforeAll(async () => {
  const modelPath = await makeModelFile("tiny-qwen2.5-0.5b", "q8_0", 1, ["--context", "32768"]);
  server = await startServer([
    "--model", modelPath, "--served-model-name", MODEL, "--threads", "2", "--max-model-len", "16384",
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--chat-template", llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"),
    "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
    "--override-generation-config", JSON.stringify({ max_new_tokens: MAX_NEW_TOKENS }),
  ]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });
});

afterAll(async () => {
  await server?.stop();
});

/** The /metrics counters this file checks. */
async function counters(): Promise<{ responses2xx: number; successes: number }> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const sum = (re: RegExp) => [...text.matchAll(re)].reduce((s, m) => s + Number(m[1]), 0);
  return {
    responses2xx: sum(/^http_requests_total\{method="POST",status="2xx",handler="\/v1\/responses"\} (\S+)$/gm),
    successes: sum(/^vllm:request_success_total\{[^}]*\} (\S+)$/gm),
  };
}

describe("the openai SDK (client.responses)", () => {
  test("responses.create: one message, usage, output_text; the server's max_new_tokens default applies", async () => {
    const before = await counters();
    const r = await client.responses.create({ model: MODEL, input: "Tell me about foxes.", temperature: 0, seed: 1 } as never);
    expect(r.object).toBe("response");
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details?.reason).toBe("max_output_tokens");
    expect(r.output[0]!.type).toBe("message");
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBe(MAX_NEW_TOKENS);
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + MAX_NEW_TOKENS);
    expect(r.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0);
    // counted once in /metrics: one HTTP response, one finished engine request
    const after = await counters();
    expect(after.responses2xx - before.responses2xx).toBe(1);
    expect(after.successes - before.successes).toBe(1);
    expect(server.log()).toMatch(/"POST \/v1\/responses HTTP\/1\.1" 200/);
  });

  test("streamed: every event in order and shape; the SDK's stream helper assembles the same text", async () => {
    const stream = await client.responses.create({ model: MODEL, input: "Tell me about foxes.", max_output_tokens: 12, temperature: 0, stream: true });
    const events: Json[] = [];
    for await (const event of stream) events.push(event as unknown as Json);
    const final = checkEventStream(events);
    const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
    expect(final.output[0].content[0].text).toBe(text);
    expect(final.usage.output_tokens).toBe(12);
    // the helper (ResponseStream) folds the events itself
    const helper = client.responses.stream({ model: MODEL, input: "Tell me about foxes.", max_output_tokens: 12, temperature: 0 });
    const helped = await helper.finalResponse();
    expect(helped.output_text).toBe(text);
  });

  test("a function-tool round trip: a forced call, then its output sent back through previous_response_id", async () => {
    const first = await client.responses.create({ model: MODEL, input: "What is the weather in Paris for 3 days?", tools: TOOLS, tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 48 });
    const call = first.output.find((i) => i.type === "function_call");
    if (call === undefined || call.type !== "function_call") throw new Error("no function call");
    expect(call.name).toBe("get_weather");
    expect(validWeather(JSON.parse(call.arguments))).toBe(true);
    const second = await client.responses.create({
      model: MODEL, previous_response_id: first.id, tools: TOOLS, tool_choice: "none", max_output_tokens: 8,
      input: [{ type: "function_call_output", call_id: call.call_id, output: '{"temperature_c": 21}' }],
    });
    expect(second.output.map((i) => i.type)).toEqual(["message"]);
    expect(second.previous_response_id).toBe(first.id);
    // the earlier turn and the tool result are in the prompt: longer than the first prompt plus its output
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);
  });

  test("the tool call streamed: added, argument deltas, done; retrieve gives the stored response", async () => {
    const stream = await client.responses.create({ model: MODEL, input: "Weather in Rome for 2 days?", tools: TOOLS, tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 48, stream: true });
    const events: Json[] = [];
    for await (const event of stream) events.push(event as unknown as Json);
    const final = checkEventStream(events);
    const args = events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e.delta).join("");
    expect(validWeather(JSON.parse(args))).toBe(true);
    const stored = await client.responses.retrieve(final.id);
    expect(stored.output).toEqual(final.output);
    expect(await client.responses.delete(final.id)).toMatchObject({ id: final.id, deleted: true });
    const gone = await client.responses.retrieve(final.id).then(() => null, (error: unknown) => error);
    expect(gone).toMatchObject({ status: 404 });
  });

  test("previous_response_id chaining: the second turn sees the first", async () => {
    const first = await client.responses.create({ model: MODEL, input: "My name is Ada.", instructions: "Be brief.", max_output_tokens: 6 });
    const second = await client.responses.create({ model: MODEL, input: "What is my name?", previous_response_id: first.id, max_output_tokens: 6 });
    const alone = await client.responses.create({ model: MODEL, input: "What is my name?", max_output_tokens: 6, store: false });
    expect(second.usage!.input_tokens).toBeGreaterThan(alone.usage!.input_tokens + first.usage!.output_tokens);
  });

  test("background: queued at once, retrieve follows it, cancel stops a long run", async () => {
    const quick = await client.responses.create({ model: MODEL, input: "Hi", max_output_tokens: 4, background: true });
    expect(quick.status).toBe("queued");
    let done = quick;
    for (let i = 0; i < 200 && (done.status === "queued" || done.status === "in_progress"); i++) {
      await Bun.sleep(25);
      done = await client.responses.retrieve(quick.id);
    }
    expect(done.status).toBe("incomplete");
    expect(done.usage!.output_tokens).toBe(4);
    const long = await client.responses.create({ model: MODEL, input: "Hi", max_output_tokens: 8000, ignore_eos: true, background: true } as never);
    const cancelled = await client.responses.cancel(long.id);
    expect(cancelled.status).toBe("cancelled");
    await Bun.sleep(200);
    expect((await client.responses.retrieve(long.id)).status).toBe("cancelled");
  });

  test("errors in OpenAI's shape: an image input on a model without a projector is a 400 naming it and --mmproj", async () => {
    const bad = await client.responses.create({ model: MODEL, input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png", detail: "auto" }] }] })
      .then(() => null, (error: unknown) => error);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({ status: 400, param: "input[0].content[0].image_url" });
    expect((bad as Error).message).toContain("--mmproj");
  });
});

describe("the AI SDK's default OpenAI provider (@ai-sdk/openai uses /v1/responses)", () => {
  const provider = () => createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });

  test("generateText and streamText", async () => {
    const before = await counters();
    const r = await generateText({ model: provider()(MODEL), prompt: "Tell me about foxes.", maxOutputTokens: 8, temperature: 0 });
    expect(r.text.length).toBeGreaterThan(0);
    expect(r.usage.outputTokens).toBe(8);
    expect(r.finishReason).toBe("length");
    const s = streamText({ model: provider()(MODEL), prompt: "Tell me about foxes.", maxOutputTokens: 8, temperature: 0 });
    expect(await s.text).toBe(r.text);
    const after = await counters();
    expect(after.responses2xx - before.responses2xx).toBe(2);
  });

  test("a forced tool step with the tool's result, then the answer", async () => {
    const executed: unknown[] = [];
    const result = await generateText({
      model: provider()(MODEL),
      prompt: "What is the weather in Paris for 3 days?",
      maxOutputTokens: 48,
      tools: {
        get_weather: tool({
          description: "Weather in a city",
          inputSchema: jsonSchema<{ city: string; days: number }>(WEATHER_PARAMS as never),
          execute: async (input) => { executed.push(input); return { temperature_c: 21 }; },
        }),
      },
      toolChoice: { type: "tool", toolName: "get_weather" },
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? undefined : { toolChoice: "none" }),
      stopWhen: ({ steps }) => steps.length >= 2,
    });
    expect(executed).toHaveLength(1);
    expect(validWeather(executed[0])).toBe(true);
    expect(result.steps).toHaveLength(2);
    expect(result.steps[1]!.toolCalls).toHaveLength(0);
  });
});

/** The SSE body of a Responses stream as its events (`event: <type>` / `data: <json>` pairs). */
function sseEvents(text: string): Json[] {
  return text.split("\n\n").filter((b) => b.trim() !== "").map((block) => {
    const [event, data] = block.split("\n");
    const parsed = JSON.parse(data!.slice("data: ".length)) as Json;
    expect(event).toBe(`event: ${parsed.type}`);
    return parsed;
  });
}

/**
 * Codex against fennec through a recording proxy: every request it sends and every answer it gets are kept, and each
 * streamed answer is checked event by event. A random model never picks a tool under tool_choice auto, so the proxy
 * changes one request, the first: tool_choice forced to Codex's own shell tool (exec_command), whose `cmd` is narrowed
 * to `ls` (a random model would write a random command, or a string that never closes). Everything else is what Codex
 * sent; Codex itself runs the call, sends its function_call_output back, and fennec answers that turn unchanged.
 */
describe("Codex (codex exec, custom provider, wire_api = responses)", () => {
  const LS_ONLY = { type: "object", properties: { cmd: { type: "string", enum: ["ls"] } }, required: ["cmd"], additionalProperties: false };
  /** the input item types input-items.ts translates (anything else is a 400 naming it) */
  const ITEM_TYPES = ["message", "function_call", "function_call_output", "reasoning"];

  test("one headless turn with a forced tool call: Codex runs it, sends the output back, fennec answers", async () => {
    const exchanges: { path: string; body: Json | null; status: number; answer: string }[] = [];
    const proxy = Bun.serve({
      hostname: "127.0.0.1", port: 0, idleTimeout: 0,
      async fetch(request) {
        const url = new URL(request.url);
        const text = await request.text();
        const body = text === "" ? null : JSON.parse(text) as Json;
        let sent = body;
        if (body !== null && url.pathname === "/v1/responses" && exchanges.length === 0) {
          const tools = (body.tools as Json[]).map((t) => (t.name === "exec_command" ? { ...t, parameters: LS_ONLY } : t));
          sent = { ...body, tools, tool_choice: { type: "function", name: "exec_command" } };
        }
        const headers = new Headers(request.headers);
        headers.delete("content-length");
        headers.delete("accept-encoding");
        const res = await fetch(`${server.url}${url.pathname}${url.search}`, { method: request.method, headers, body: sent === null ? undefined : JSON.stringify(sent) });
        const answer = await res.text();
        exchanges.push({ path: url.pathname, body, status: res.status, answer });
        return new Response(answer, { status: res.status, headers: { "content-type": res.headers.get("content-type") ?? "application/json" } });
      },
    });
    const home = mkdtempSync(join(tmpdir(), "fennec-codex-"));
    const work = mkdtempSync(join(tmpdir(), "fennec-codex-work-"));
    writeFileSync(join(work, "notes.txt"), "fennec\n");
    // web_search is a built-in tool fennec refuses (400): turned off, as any local provider needs
    writeFileSync(join(home, "config.toml"), [
      `model = "${MODEL}"`, `model_provider = "fennec"`, `web_search = "disabled"`,
      `[model_providers.fennec]`, `name = "fennec"`, `base_url = "http://127.0.0.1:${proxy.port}/v1"`, `env_key = "FENNEC_API_KEY"`,
      `wire_api = "responses"`, `request_max_retries = 0`, `stream_max_retries = 0`,
    ].join("\n"));
    try {
      const before = await counters();
      const last = join(work, "last-message.txt");
      const codex = Bun.spawn([join(import.meta.dir, "..", "..", "node_modules", ".bin", "codex"), "exec", "--skip-git-repo-check", "--ephemeral", "-s", "read-only", "-o", last, "List the files here."], {
        cwd: work, env: { ...process.env, CODEX_HOME: home, FENNEC_API_KEY: "none" }, stdout: "pipe", stderr: "pipe", stdin: "ignore",
      });
      const [code, out, err] = await Promise.all([codex.exited, new Response(codex.stdout).text(), new Response(codex.stderr).text()]);
      if (code !== 0) throw new Error(`codex exited ${code}:\n${out}\n${err}`);
      expect(readFileSync(last, "utf8").length).toBeGreaterThan(0);
      const turns = exchanges.filter((e) => e.path === "/v1/responses");
      expect(turns.length).toBeGreaterThanOrEqual(2);
      const declared = Object.keys(ResponsesRequest.properties);
      for (const turn of turns) {
        expect(turn.status).toBe(200);
        // every field Codex sends is one fennec declares (implemented, or refused by name when set): none slips by
        expect(Object.keys(turn.body!).filter((k) => !declared.includes(k))).toEqual([]);
        expect((turn.body!.input as Json[]).map((i) => i.type ?? "message").filter((t) => !ITEM_TYPES.includes(t))).toEqual([]);
        expect(turn.body!.stream).toBe(true);
        checkEventStream(sseEvents(turn.answer));
      }
      // turn 1: the forced call; turn 2: Codex sent it back with the output of running it, with the same call_id
      const call = checkEventStream(sseEvents(turns[0]!.answer)).output.find((i: Json) => i.type === "function_call");
      expect(call).toMatchObject({ name: "exec_command", status: "completed" });
      expect(JSON.parse(call.arguments)).toEqual({ cmd: "ls" });
      const input = turns[1]!.body!.input as Json[];
      expect(input.find((i) => i.type === "function_call")).toMatchObject({ name: "exec_command", call_id: call.call_id });
      const output = input.find((i) => i.type === "function_call_output");
      expect(output).toMatchObject({ call_id: call.call_id });
      // Codex really ran `ls` in the work folder: its output lists the file put there
      expect(String(output!.output)).toContain("notes.txt");
      // the second turn's prompt holds the call and its result: fennec read them (it answered with a message)
      const answer = checkEventStream(sseEvents(turns[1]!.answer));
      expect(answer.output.some((i: Json) => i.type === "message")).toBe(true);
      // each turn counted once in /metrics
      const after = await counters();
      expect(after.responses2xx - before.responses2xx).toBe(turns.length);
      expect(after.successes - before.successes).toBe(turns.length);
    } finally {
      proxy.stop(true);
      rmSync(home, { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
    }
  });
});
