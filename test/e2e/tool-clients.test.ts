/**
 * Tool calling for real: the server as a process (the compiled binary when it is built from the current sources),
 * a random-weight model of Qwen2.5's shape and vocabulary (make-model, one layer) with Qwen2.5's real chat template
 * swapped in (--chat-template, from llama.cpp's models/templates), `--tool-call-parser hermes`, and the clients agent
 * frameworks use. A random model never decides to call a tool, so the first turn forces one (tool_choice named or
 * required: grammar-constrained); every forced call must parse and validate against its tool's schema (ajv). The
 * second turn sends the tool result back and gets an answer, through the official openai client, LangChain.js and the
 * Vercel AI SDK.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import Ajv from "ajv";
import OpenAI from "openai";
import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { generateText, isStepCount, jsonSchema, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(120_000);

/** Bounded values, so a random model cannot write forever inside a string and every forced call completes. */
const WEATHER_PARAMS = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Lyon", "Rome"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
} as const;
const TIME_PARAMS = { type: "object", properties: { utc: { type: "boolean" } }, required: ["utc"], additionalProperties: false } as const;
const TOOLS = [
  { type: "function" as const, function: { name: "get_weather", description: "Weather in a city", parameters: WEATHER_PARAMS } },
  { type: "function" as const, function: { name: "get_time", description: "The time", parameters: TIME_PARAMS } },
];
const ajv = new Ajv();
const validators: Record<string, ReturnType<Ajv["compile"]>> = { get_weather: ajv.compile(WEATHER_PARAMS), get_time: ajv.compile(TIME_PARAMS) };

let server: ServerProcess;
let client: OpenAI;
let model = "";
/** a Qwen3-shaped model with Qwen3.5's template (which opens the think block in the prompt) and --reasoning-parser qwen3 */
let thinker: ServerProcess;

beforeAll(async () => {
  const [modelPath, qwen3Path] = await Promise.all([makeModelFile("tiny-qwen2.5-0.5b", "q8_0", 1), makeModelFile("tiny-qwen3-0.6b", "q8_0", 1)]);
  thinker = await startServer(["--model", qwen3Path, "--threads", "1", "--max-model-len", "2048", "--reasoning-parser", "qwen3", "--chat-template", llamaTemplatePath("Qwen3.5-4B")]);
  server = await startServer([
    "--model", modelPath, "--threads", "2", "--max-model-len", "2048",
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--chat-template", llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"),
    "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
  ]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none" });
  model = (await client.models.list()).data[0]!.id;
});

afterAll(async () => {
  await Promise.all([server?.stop(), thinker?.stop()]);
});

const ASK = [{ role: "user" as const, content: "What is the weather in Paris for 3 days?" }];

describe("forced tool calls on a random model always validate", () => {
  test("a named function: one call, arguments valid against its schema, for every seed", async () => {
    for (let seed = 0; seed < 6; seed++) {
      const r = await client.chat.completions.create({ model, messages: ASK, tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 48, seed, temperature: 1 });
      const calls = r.choices[0]!.message.tool_calls ?? [];
      expect(calls).toHaveLength(1);
      const call = calls[0]!;
      if (call.type !== "function") throw new Error("not a function call");
      expect(call.function.name).toBe("get_weather");
      expect(call.id).toMatch(/^chatcmpl-tool-[0-9a-f]{16}$/);
      expect(validators.get_weather!(JSON.parse(call.function.arguments))).toBe(true);
    }
  });

  test('tool_choice "required": at least one call, each valid for its tool, finish_reason tool_calls', async () => {
    // the array may hold several calls before the model closes it: room for a few
    for (let seed = 0; seed < 3; seed++) {
      const r = await client.chat.completions.create({ model, messages: ASK, tools: TOOLS, tool_choice: "required", max_tokens: 320, seed, temperature: 1 });
      const calls = r.choices[0]!.message.tool_calls ?? [];
      expect(calls.length).toBeGreaterThanOrEqual(1);
      for (const call of calls) {
        if (call.type !== "function") throw new Error("not a function call");
        expect(validators[call.function.name]!(JSON.parse(call.function.arguments))).toBe(true);
      }
      expect(r.choices[0]!.finish_reason).toBe("tool_calls");
    }
  });

  test("streamed: the openai client's stream helper assembles the same valid call", async () => {
    const stream = client.chat.completions.stream({ model, messages: ASK, tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 48, seed: 3 });
    const final = await stream.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]!;
    if (call.type !== "function") throw new Error("not a function call");
    expect(call.function.name).toBe("get_weather");
    expect(validators.get_weather!(JSON.parse(call.function.arguments))).toBe(true);
  });
});

describe("two-turn tool conversations (call -> tool result -> answer)", () => {
  test("the official openai client", async () => {
    const first = await client.chat.completions.create({ model, messages: ASK, tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 48 });
    const assistant = first.choices[0]!.message;
    const call = assistant.tool_calls![0]!;
    const second = await client.chat.completions.create({
      model, tools: TOOLS, tool_choice: "none", max_tokens: 8,
      messages: [...ASK, assistant, { role: "tool", tool_call_id: call.id, content: '{"temperature_c": 21}' }],
    });
    expect(typeof second.choices[0]!.message.content).toBe("string");
    expect(second.choices[0]!.message.tool_calls ?? []).toEqual([]);
    // the tool result reached the prompt: the second prompt is longer than the first by at least the result
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens + 5);
  });

  test("LangChain.js (@langchain/openai ChatOpenAI.bindTools)", async () => {
    const llm = new ChatOpenAI({ model, apiKey: "none", configuration: { baseURL: `${server.url}/v1` }, maxTokens: 48, temperature: 1 });
    const lcTool = { type: "function" as const, function: TOOLS[0]!.function };
    const ai = await llm.bindTools([lcTool], { tool_choice: "get_weather" }).invoke([new HumanMessage(ASK[0]!.content)]);
    expect(ai.tool_calls).toHaveLength(1);
    const call = ai.tool_calls![0]!;
    expect(call.name).toBe("get_weather");
    expect(validators.get_weather!(call.args)).toBe(true);
    const answer = await llm.invoke([new HumanMessage(ASK[0]!.content), ai, new ToolMessage({ content: '{"temperature_c": 21}', tool_call_id: call.id! })]);
    expect(typeof answer.content).toBe("string");
    expect(answer.tool_calls ?? []).toEqual([]);
  });

  test("the Vercel AI SDK (ai + @ai-sdk/openai-compatible): a tool step, then the answer step", async () => {
    const provider = createOpenAICompatible({ name: "fennec", baseURL: `${server.url}/v1` });
    const executed: unknown[] = [];
    const result = await generateText({
      model: provider(model),
      prompt: ASK[0]!.content,
      maxOutputTokens: 48,
      tools: {
        get_weather: tool({
          description: "Weather in a city",
          inputSchema: jsonSchema<{ city: string; days: number }>(WEATHER_PARAMS as never),
          execute: async (input) => { executed.push(input); return { temperature_c: 21 }; },
        }),
      },
      toolChoice: { type: "tool", toolName: "get_weather" },
      // the first step must call the tool; the second answers with the result in the conversation
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? undefined : { toolChoice: "none" }),
      stopWhen: isStepCount(2),
    });
    expect(result.steps).toHaveLength(2);
    expect(executed).toHaveLength(1);
    expect(validators.get_weather!(executed[0])).toBe(true);
    expect(result.steps[0]!.toolCalls).toHaveLength(1);
    expect(result.steps[1]!.toolCalls).toHaveLength(0);
    expect(typeof result.text).toBe("string");
  });
});

describe("a Qwen3 model with --reasoning-parser qwen3 (Qwen3.5's template opens <think> in the prompt)", () => {
  const thinkerClient = () => new OpenAI({ baseURL: `${thinker.url}/v1`, apiKey: "none" });
  test("the generated text is reasoning, never content, streamed and not; <think> tags never reach the client", async () => {
    const c = thinkerClient();
    const m = (await c.models.list()).data[0]!.id;
    const r = await c.chat.completions.create({ model: m, messages: ASK, max_tokens: 12, seed: 1, ignore_eos: true } as never);
    const message = r.choices[0]!.message as unknown as { content: string | null; reasoning: string | null };
    // no </think> in 12 random tokens: an unfinished reasoning block (vLLM: all reasoning, content null)
    expect(message.content).toBeNull();
    expect(typeof message.reasoning).toBe("string");
    expect(message.reasoning!.length).toBeGreaterThan(0);
    let reasoning = "";
    for await (const chunk of await c.chat.completions.create({ model: m, messages: ASK, max_tokens: 12, seed: 1, ignore_eos: true, stream: true } as never) as unknown as AsyncIterable<{ choices: { delta: { content?: string | null; reasoning?: string } }[] }>) {
      const delta = chunk.choices[0]?.delta;
      if (delta === undefined) continue;
      expect(delta.content ?? "").toBe("");
      reasoning += delta.reasoning ?? "";
    }
    // the same seed and tokens: the stream's reasoning is the non-streamed one
    expect(reasoning).toBe(message.reasoning!);
  });

  test("enable_thinking false: the template closes the block, the text is content", async () => {
    const c = thinkerClient();
    const m = (await c.models.list()).data[0]!.id;
    const r = await c.chat.completions.create({ model: m, messages: ASK, max_tokens: 12, seed: 1, ignore_eos: true, chat_template_kwargs: { enable_thinking: false } } as never);
    const message = r.choices[0]!.message as unknown as { content: string | null; reasoning: string | null };
    expect(message.reasoning).toBeNull();
    expect(typeof message.content).toBe("string");
    expect(message.content!.length).toBeGreaterThan(0);
  });
});
