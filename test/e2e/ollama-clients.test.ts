/**
 * Ollama's API on the real server process (the compiled binary when it is built from the current sources) through
 * the real clients: the `ollama` library (chat, generate, list, show, ps, embed, pull, copy, delete) and LangChain.js
 * (@langchain/ollama ChatOllama, OllamaEmbeddings). Every record a client yields is checked against Ollama's record
 * schemas (test/server/ollama-schemas.ts), and raw NDJSON bodies line by line. /api/pull downloads from the local Hub
 * stand-in (test/hub/hub-stand-in.ts) into a temporary Hugging Face cache. Two servers: the embedded stories260K
 * (generation) and a random-weight embedding model of Qwen3-Embedding's shape.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import { ChatOllama, OllamaEmbeddings } from "@langchain/ollama";
import { HumanMessage } from "@langchain/core/messages";
import { llamaTemplatePath, llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { MODEL_SHAPES } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { defaultModelPath } from "../../src/gguf/default-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { startHubStandIn, type HubStandIn } from "../hub/hub-stand-in.ts";
import { checkOllama, ndjsonRecords } from "../server/ollama-schemas.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(120_000);

const dir = mkdtempSync(join(tmpdir(), "fennec-ollama-e2e-"));
const REPO = "fennec-test/stories260K-GGUF";
let hub: HubStandIn;
let server: ServerProcess;
let embedder: ServerProcess;
/** a Qwen3-shaped random model with Qwen3.5's template (it opens the think block in the prompt) and --reasoning-parser qwen3 */
let thinker: ServerProcess;
let ollama: Ollama;

beforeAll(async () => {
  hub = await startHubStandIn({ [REPO]: { files: { "stories260K-Q8_0.gguf": new Uint8Array(readFileSync(defaultModelPath())) } } });
  const vocab = readGguf(llamaVocabPath("qwen2"));
  if (!vocab.ok) throw new Error(vocab.error);
  const embeddingPath = join(dir, "embedding.gguf");
  writeGgufFile(embeddingPath, randomModel({ shapeName: "tiny-qwen3-embedding-0.6b", shape: MODEL_SHAPES["tiny-qwen3-embedding-0.6b"]!, type: "q8_0", seed: 5, vocab: vocab.value }));
  const env = { HF_ENDPOINT: hub.url, HF_HOME: join(dir, "hf"), HF_TOKEN: "", HF_HUB_OFFLINE: "", HF_HUB_CACHE: "" };
  const qwen3Path = await makeModelFile("tiny-qwen3-0.6b", "q8_0", 1);
  [server, embedder, thinker] = await Promise.all([
    startServer(["--served-model-name", "stories", "--max-model-len", "256", "--threads", "1", "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'], { env }),
    startServer(["--model", embeddingPath, "--served-model-name", "embedder", "--max-model-len", "256", "--kv-cache-memory", "16M", "--max-num-batched-tokens", "64", "--threads", "1"]),
    startServer(["--model", qwen3Path, "--served-model-name", "thinker", "--threads", "1", "--max-model-len", "2048", "--reasoning-parser", "qwen3", "--chat-template", llamaTemplatePath("Qwen3.5-4B")]),
  ]);
  ollama = new Ollama({ host: server.url });
}, 180_000);

afterAll(async () => {
  await Promise.all([server?.stop(), embedder?.stop(), thinker?.stop(), hub?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const GREEDY = { temperature: 0, num_predict: 12 };

describe("the ollama library", () => {
  test("list, show and ps describe the served model from its GGUF", async () => {
    const list = await ollama.list();
    checkOllama("tags", list);
    expect(list.models.map((m) => m.name)).toEqual(["stories:latest"]);
    expect(list.models[0]!.details.family).toBe("llama");
    const show = await ollama.show({ model: "stories" });
    checkOllama("show", show);
    // the client types model_info as a Map; on the wire it is a JSON object
    const info = show.model_info as unknown as Record<string, unknown>;
    expect(info["general.architecture"]).toBe("llama");
    expect(info["llama.context_length"]).toBeNumber();
    expect(info["general.name"]).toBeUndefined();
    const ps = await ollama.ps();
    checkOllama("ps", ps);
    expect(ps.models[0]).toMatchObject({ name: "stories:latest", size_vram: 0, context_length: 256 });
  });

  test("chat: the stream's records match the schema one by one and add up to the non-streamed answer", async () => {
    const messages = [{ role: "user", content: "Once upon a time" }];
    const whole = await ollama.chat({ model: "stories", messages, options: GREEDY, stream: false });
    checkOllama("chat", whole);
    expect(whole.message.content.length).toBeGreaterThan(0);
    expect(whole.eval_count).toBeLessThanOrEqual(12);
    expect(whole.prompt_eval_count).toBeGreaterThan(0);
    let text = "";
    let last: Record<string, unknown> = {};
    for await (const part of await ollama.chat({ model: "stories", messages, options: GREEDY, stream: true })) {
      checkOllama("chat", part);
      text += part.message.content;
      last = part as unknown as Record<string, unknown>;
    }
    expect(text).toBe(whole.message.content);
    expect(last).toMatchObject({ done: true, done_reason: whole.done_reason!, eval_count: whole.eval_count });
    expect(last["eval_duration"] as number).toBeGreaterThan(0);
  });

  test("generate: raw and templated, streamed and not; the raw NDJSON body line by line", async () => {
    const whole = await ollama.generate({ model: "stories:latest", prompt: "Lily", raw: true, options: GREEDY, stream: false });
    checkOllama("generate", whole);
    let text = "";
    for await (const part of await ollama.generate({ model: "stories", prompt: "Lily", raw: true, options: GREEDY, stream: true })) {
      checkOllama("generate", part);
      text += part.response;
    }
    expect(text).toBe(String(whole.response));
    const res = await fetch(`${server.url}/api/generate`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "stories", prompt: "Tom", options: GREEDY }) });
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const records = await ndjsonRecords(res, "generate");
    expect(records.at(-1)).toMatchObject({ done: true });
  });

  test("format: a JSON schema constrains the answer (bounded values, so it completes); format json any object", async () => {
    const schema = { type: "object", properties: { animal: { type: "string", enum: ["fox", "cat"] }, legs: { type: "integer", minimum: 0, maximum: 8 } }, required: ["animal", "legs"], additionalProperties: false };
    const answer = await ollama.chat({ model: "stories", messages: [{ role: "user", content: "An animal" }], format: schema, options: { num_predict: 64, seed: 1 }, stream: false });
    expect(answer.done_reason).toBe("stop");
    const parsed = JSON.parse(answer.message.content) as { animal: string; legs: number };
    expect(["fox", "cat"]).toContain(parsed.animal);
    expect(Object.keys(parsed).sort()).toEqual(["animal", "legs"]);
    let streamed = "";
    for await (const part of await ollama.generate({ model: "stories", prompt: "JSON", format: "json", options: { num_predict: 48, seed: 2 }, stream: true })) {
      checkOllama("generate", part);
      streamed += part.response;
    }
    // an object, complete or cut by num_predict: it starts as one either way
    expect(streamed.trimStart().startsWith("{")).toBe(true);
  });

  test("keep_alive reaches /api/ps; an invalid one is refused as a ResponseError with Ollama's status", async () => {
    await ollama.generate({ model: "stories", prompt: "", keep_alive: "2h", stream: false });
    const expires = Date.parse((await ollama.ps()).models[0]!.expires_at as unknown as string);
    expect(expires).toBeGreaterThan(Date.now() + 7_100_000);
    // keep_alive 0 on this one-model server unloads it: e2e/ollama-keep-alive.test.ts
    const refused = await ollama.chat({ model: "stories", messages: [{ role: "user", content: "x" }], keep_alive: "5 minutes" }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ name: "ResponseError", status_code: 400 });
    expect(String((refused as Error).message)).toContain('invalid duration "5 minutes"');
  });

  test("errors: an unknown model is a 404 ResponseError; images on a model without a projector are refused", async () => {
    const missing = await ollama.chat({ model: "llama3.2", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(missing).toMatchObject({ name: "ResponseError", status_code: 404, error: "model 'llama3.2' not found" });
    const image = await ollama.generate({ model: "stories", prompt: "what is this", images: ["aGVsbG8="] }).catch((e: unknown) => e);
    expect(image).toMatchObject({ name: "ResponseError", status_code: 400 });
  });

  test("copy then delete a name", async () => {
    await ollama.copy({ source: "stories", destination: "tales:v2" });
    expect((await ollama.list()).models.map((m) => m.name)).toContain("tales:v2");
    expect((await ollama.chat({ model: "tales:v2", messages: [{ role: "user", content: "a" }], options: { num_predict: 2 } })).model).toBe("tales:v2");
    await ollama.delete({ model: "tales:v2" });
    expect((await ollama.list()).models.map((m) => m.name)).not.toContain("tales:v2");
  });

  test("pull: Ollama's progress records from the Hub stand-in, the file in the cache", async () => {
    const statuses: string[] = [];
    let completed = 0;
    for await (const progress of await ollama.pull({ model: `hf.co/${REPO}:Q8_0`, stream: true })) {
      checkOllama("progress", progress);
      statuses.push(progress.status);
      if (progress.completed !== undefined) completed = Math.max(completed, progress.completed);
    }
    expect(statuses[0]).toBe("pulling manifest");
    expect(statuses.slice(-3)).toEqual(["verifying sha256 digest", "writing manifest", "success"]);
    expect(completed).toBe(readFileSync(defaultModelPath()).length);
    const snapshots = join(dir, "hf", "hub", `models--${REPO.replace("/", "--")}`, "snapshots", hub.commitOf(REPO), "stories260K-Q8_0.gguf");
    expect(existsSync(snapshots)).toBe(true);
    const failed = await ollama.pull({ model: "fennec-test/missing-GGUF", stream: false }).catch((e: unknown) => e);
    expect(failed).toMatchObject({ name: "ResponseError" });
  });

  test("embed on the embedding server: normalised vectors; chat there is refused", async () => {
    const client = new Ollama({ host: embedder.url });
    const out = await client.embed({ model: "embedder", input: ["a fox", "the sun"] });
    checkOllama("embed", out);
    expect(out.embeddings).toHaveLength(2);
    for (const v of out.embeddings) expect(Math.hypot(...v)).toBeCloseTo(1, 4);
    const legacy = await client.embeddings({ model: "embedder", prompt: "a fox" });
    const n = Math.hypot(...legacy.embedding);
    legacy.embedding.forEach((x, i) => expect(x / n).toBeCloseTo(out.embeddings[0]![i]!, 4));
    expect(await client.chat({ model: "embedder", messages: [{ role: "user", content: "a" }] }).catch((e: unknown) => e)).toMatchObject({ status_code: 400 });
  });
});

describe("think on a thinking model", () => {
  const ask = [{ role: "user", content: "Weather in Paris?" }];
  test("omitted or true: the text is thinking (no </think> from a random model), streamed and not; false: content", async () => {
    const client = new Ollama({ host: thinker.url });
    const whole = await client.chat({ model: "thinker", messages: ask, options: { num_predict: 10, seed: 1 }, stream: false });
    checkOllama("chat", whole);
    expect(whole.message.thinking!.length).toBeGreaterThan(0);
    expect(whole.message.content).toBe("");
    let thinking = "";
    for await (const part of await client.chat({ model: "thinker", messages: ask, think: true, options: { num_predict: 10, seed: 1 }, stream: true })) {
      checkOllama("chat", part);
      expect(part.message.content).toBe("");
      thinking += part.message.thinking ?? "";
    }
    expect(thinking).toBe(whole.message.thinking!);
    const off = await client.chat({ model: "thinker", messages: ask, think: false, options: { num_predict: 10, seed: 1 }, stream: false });
    expect(off.message.thinking).toBeUndefined();
    expect(off.message.content.length).toBeGreaterThan(0);
    expect((await client.show({ model: "thinker" })).capabilities).toContain("thinking");
  });
});

describe("observability", () => {
  test("each Ollama request: one access-log line and one count in /metrics under its route", async () => {
    const before = await (await fetch(`${server.url}/metrics`)).text();
    const count = (text: string) => Number(/http_requests_total\{[^}]*handler="\/api\/version"[^}]*\} (\d+)/.exec(text)?.[1] ?? 0);
    await ollama.version();
    await ollama.version();
    const after = await (await fetch(`${server.url}/metrics`)).text();
    expect(count(after) - count(before)).toBe(2);
    await Bun.sleep(50);
    expect(server.log()).toContain('"POST /api/chat HTTP/1.1" 200');
    expect(server.log()).toContain('"POST /api/chat HTTP/1.1" 404');
  });
});

describe("LangChain.js (@langchain/ollama)", () => {
  test("ChatOllama invoke and stream agree; usage from Ollama's counts", async () => {
    const chat = new ChatOllama({ baseUrl: server.url, model: "stories", temperature: 0, numPredict: 12 });
    const answer = await chat.invoke([new HumanMessage("Once upon a time")]);
    expect(typeof answer.content).toBe("string");
    expect((answer.content as string).length).toBeGreaterThan(0);
    expect(answer.usage_metadata?.output_tokens).toBeGreaterThan(0);
    expect(answer.usage_metadata?.input_tokens).toBeGreaterThan(0);
    let streamed = "";
    for await (const chunk of await chat.stream([new HumanMessage("Once upon a time")])) streamed += chunk.content as string;
    expect(streamed).toBe(answer.content as string);
  });

  test("OllamaEmbeddings on the embedding server", async () => {
    const embeddings = new OllamaEmbeddings({ baseUrl: embedder.url, model: "embedder" });
    const [a, b] = await embeddings.embedDocuments(["a fox", "the sun"]);
    const q = await embeddings.embedQuery("a fox");
    expect(a!.length).toBeGreaterThan(0);
    q.forEach((x, i) => expect(x).toBeCloseTo(a![i]!, 4));
    expect(b).not.toEqual(a);
  });
});
