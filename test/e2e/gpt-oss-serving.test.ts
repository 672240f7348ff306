/**
 * gpt-oss served by the binary with no parser flags: its o200k_harmony vocabulary and Harmony chat template
 * (scripts/gpt-oss-vocab.ts), the openai tool parser and openai_gptoss reasoning parser chosen from the template, the
 * batched WASM forward with sinks, sliding window and experts. A random model never writes Harmony, so this one's
 * weights are set by hand to write one reply: a one-layer gpt-oss whose only sliding layer has a window of 2 and
 * uniform attention (q = k = 0, sinks at -30), so each position's residual holds its own token and the one before it
 * (one-hot embeddings; the attention copies the previous token into the upper half), the experts add nothing, and the
 * output matrix maps each (previous, current) pair of the reply to its next token: after the prompt's
 * `<|start|>assistant` it writes an analysis message, then a call of get_weather on the commentary channel, then
 * <|call|> (an end of generation). The chat completion then splits `reasoning` from a tool call, whole and streamed;
 * a forced (named) call goes through the grammar.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gptOssVocabPath } from "../../scripts/gpt-oss-vocab.ts";
import type { GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import { makeTinyModel, TINY_GPT_OSS, type PlannedTensor } from "../model/tiny-model.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(180_000);

const REASONING = "Need the weather.";
const REPLY = `<|channel|>analysis<|message|>${REASONING}<|end|><|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>`;
const DIM = 256;
const HALF = DIM / 2;
const TOOLS = [{
  type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Rome"] } }, required: ["city"], additionalProperties: false } },
}];

let dir = "";
let server: ServerProcess;
let model = "";

/** The hand-set model (see the file comment) over gpt-oss's vocabulary; returns its path. */
function writeHarmonyModel(path: string): void {
  const vocab = readGguf(gptOssVocabPath());
  if (!vocab.ok) throw new Error(vocab.error);
  const tokenizer = createTokenizer(vocab.value);
  const chain = tokenizer.encode(`<|start|>assistant${REPLY}`, { addSpecial: false, parseSpecial: true });
  const vocabSize = tokenizer.vocabSize;
  // a basis direction per token of the chain
  const basis = new Map<number, number>();
  for (const id of chain) if (!basis.has(id)) basis.set(id, basis.size);
  if (basis.size > HALF) throw new Error(`${basis.size} distinct tokens: more than ${HALF} directions`);
  const next = new Map<string, number>();
  for (let i = 1; i + 1 < chain.length; i++) {
    const key = `${chain[i - 1]},${chain[i]}`;
    if (next.has(key) && next.get(key) !== chain[i + 1]) throw new Error(`the reply repeats the pair ${key} with another next token`);
    next.set(key, chain[i + 1]!);
  }
  const embd = new Float32Array(vocabSize * DIM); // [vocab, dim]
  for (const [id, b] of basis) {
    embd[id * DIM + b] = 1;
    // cancels the attention's copy of the current token into the upper half: the residual keeps the previous one only
    embd[id * DIM + HALF + b] = -0.5;
  }
  const output = new Float32Array(vocabSize * DIM); // [vocab, dim]: current token 1, previous token 2 (x 0.5 copied)
  for (const [key, y] of next) {
    const [prev, cur] = key.split(",").map(Number) as [number, number];
    output[y * DIM + basis.get(cur)!] = 1;
    output[y * DIM + HALF + basis.get(prev)!] = 2;
  }
  // v = the normed embedding's lower half scaled back to one-hot (rms of an embedding row: sqrt(1.25 / dim))
  const wv = new Float32Array(DIM * DIM);
  for (let i = 0; i < HALF; i++) wv[i * DIM + i] = Math.sqrt(1.25 / DIM);
  // the attention's output (dims < HALF) goes to the upper half of the residual
  const wo = new Float32Array(DIM * DIM);
  for (let i = 0; i < HALF; i++) wo[(HALF + i) * DIM + i] = 1;
  const valuesOf = (t: PlannedTensor): Float32Array => {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (t.name === "token_embd.weight") return embd;
    if (t.name === "output.weight") return output;
    if (t.name === "blk.0.attn_v.weight") return wv;
    if (t.name === "blk.0.attn_output.weight") return wo;
    if (t.name === "blk.0.attn_sinks.weight") return new Float32Array(n).fill(-30);
    if (t.kind === "norm") return new Float32Array(n).fill(1);
    return new Float32Array(n);
  };
  const metadata: Record<string, GgufMetadataEntry> = {};
  for (const [key, entry] of vocab.value.metadata) if (key.startsWith("tokenizer.")) metadata[key] = entry;
  const gguf = makeTinyModel({
    ...TINY_GPT_OSS, vocabSize, dim: DIM, hiddenDim: 32, numLayers: 1, numHeads: 4, numKvHeads: 4, headDim: 64, contextLength: 4096, slidingWindow: 2,
    experts: { count: 4, used: 2, hiddenDim: 32 },
  }, {
    metadata,
    editTensors: (tensors) => tensors.map((t) => ({ ...t, values: valuesOf(t), type: t.name === "token_embd.weight" || t.name === "output.weight" ? GgmlType.Q8_0 : GgmlType.F32 })),
  });
  writeGgufFile(path, {
    metadata: gguf.metadata,
    tensors: gguf.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: gguf.bytes.subarray(t.offset, t.offset + t.sizeBytes) })),
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "fennec-gpt-oss-"));
  const path = join(dir, "harmony.gguf");
  writeHarmonyModel(path);
  server = await startServer(["--model", path, "--threads", "2", "--max-model-len", "4096", "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']);
  model = ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
});

afterAll(async () => {
  await server?.stop();
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

const ASK = [{ role: "user", content: "What is the weather in Paris?" }];

async function chat(body: Record<string, unknown>): Promise<Response> {
  return fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model, messages: ASK, max_tokens: 64, temperature: 0, ...body }) });
}

test("the parsers come from the Harmony template, with no flags", () => {
  expect(server.log()).toContain("Chose from the chat template: tool call parser openai");
  expect(server.log()).toContain("reasoning parser openai_gptoss");
});

test("a chat completion: the analysis channel is `reasoning`, the commentary message to functions.get_weather a tool call", async () => {
  const r = await chat({ tools: TOOLS });
  expect(r.status).toBe(200);
  const body = (await r.json()) as { choices: { message: { content: string | null; reasoning: string | null; tool_calls: { type: string; function: { name: string; arguments: string } }[] }; finish_reason: string }[] };
  const choice = body.choices[0]!;
  expect(choice.message.reasoning).toBe(REASONING);
  expect(choice.message.content).toBeNull();
  expect(choice.message.tool_calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) as unknown }))).toEqual([{ name: "get_weather", arguments: { city: "Paris" } }]);
  expect(choice.finish_reason).toBe("tool_calls");
});

test("streamed: reasoning deltas, then the call's name and its arguments", async () => {
  const r = await chat({ tools: TOOLS, stream: true });
  expect(r.status).toBe(200);
  let reasoning = "";
  let content = "";
  const names: string[] = [];
  let args = "";
  let finish = "";
  for (const line of (await r.text()).split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: { delta: { reasoning?: string; content?: string; tool_calls?: { function: { name?: string; arguments?: string } }[] }; finish_reason: string | null }[] };
    for (const c of chunk.choices) {
      reasoning += c.delta.reasoning ?? "";
      content += c.delta.content ?? "";
      for (const t of c.delta.tool_calls ?? []) {
        if (t.function.name !== undefined) names.push(t.function.name);
        args += t.function.arguments ?? "";
      }
      finish = c.finish_reason ?? finish;
    }
  }
  expect({ reasoning, content, names, args: JSON.parse(args) as unknown, finish }).toEqual({ reasoning: REASONING, content: "", names: ["get_weather"], args: { city: "Paris" }, finish: "tool_calls" });
});

test("a forced (named) tool call: the grammar's JSON, valid against the tool's schema", async () => {
  const r = await chat({ tools: TOOLS, tool_choice: { type: "function", function: { name: "get_weather" } } });
  expect(r.status).toBe(200);
  const body = (await r.json()) as { choices: { message: { content: string | null; tool_calls: { function: { name: string; arguments: string } }[] } }[] };
  const call = body.choices[0]!.message.tool_calls[0]!;
  expect(call.function.name).toBe("get_weather");
  expect(["Paris", "Rome"]).toContain((JSON.parse(call.function.arguments) as { city: string }).city);
});
