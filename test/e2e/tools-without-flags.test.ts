/**
 * Tools with no flags, against the binary: with no --tool-call-parser / --reasoning-parser, the parsers come from the
 * chat template's markers (as llama.cpp --jinja and Ollama serve tools), one start-up line says which, and
 * tool_choice "auto" is served; a template with no tool format keeps vLLM's 400. The default model renders the real
 * Qwen2.5 / Gemma 2 templates given with --chat-template (its tokens are the template's text).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

// one small tool: the default model's context is 512 tokens and the Qwen2.5 template's tool preamble takes most of it
const TOOLS = [{ type: "function", function: { name: "g", parameters: { type: "object" } } }];
let qwen: ServerProcess;
let gemma: ServerProcess;

beforeAll(async () => {
  [qwen, gemma] = await Promise.all([
    startServer(["--threads", "1", "--chat-template", llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct")]),
    startServer(["--threads", "1", "--chat-template", llamaTemplatePath("google-gemma-2-2b-it")]),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([qwen?.stop(), gemma?.stop()]);
});

const chat = (server: ServerProcess, body: Record<string, unknown>): Promise<Response> =>
  fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "Weather?" }], max_tokens: 8, ...body }) });

test("a template with a tool format: one start-up line names the chosen parser, and tool_choice auto is a 200", async () => {
  expect(qwen.log()).toContain("Chose from the chat template: tool call parser hermes");
  const response = await chat(qwen, { tools: TOOLS, tool_choice: "auto" });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { choices: { finish_reason: string }[] };
  expect(["stop", "length", "tool_calls"]).toContain(body.choices[0]!.finish_reason);
});

test("a template with no tool format: no line, and tool_choice auto keeps vLLM's 400", async () => {
  expect(gemma.log()).not.toContain("Chose from the chat template");
  const response = await chat(gemma, { tools: TOOLS, tool_choice: "auto" });
  expect(response.status).toBe(400);
  expect(((await response.json()) as { error: { message: string } }).error.message).toContain("--enable-auto-tool-choice");
});
