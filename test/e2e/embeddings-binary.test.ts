/**
 * The compiled binary (dist/fennec when built from the current sources) serving an embedding GGUF without flags: the
 * official `openai` client's embeddings.create (its default base64 wire format, and float), token-id inputs, usage,
 * vLLM's 400s (dimensions on a model without matryoshka, chat and completions on an embedding model), /pooling,
 * /score and /rerank, and
 * the request counters on /metrics. The model is make-model's tiny-qwen3-embedding-0.6b (pooling_type last).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { MODEL_SHAPES } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(60_000);

const dir = mkdtempSync(join(tmpdir(), "fennec-embeddings-e2e-"));
let server: ServerProcess;
let client: OpenAI;
const MODEL = "qwen3-embedding-test";

beforeAll(async () => {
  const vocab = readGguf(llamaVocabPath("qwen2"));
  if (!vocab.ok) throw new Error(vocab.error);
  const path = join(dir, "embedding.gguf");
  writeGgufFile(path, randomModel({ shapeName: "tiny-qwen3-embedding-0.6b", shape: MODEL_SHAPES["tiny-qwen3-embedding-0.6b"]!, type: "q8_0", seed: 5, vocab: vocab.value }));
  server = await startServer(["--model", path, "--served-model-name", MODEL, "--max-model-len", "256", "--kv-cache-memory", "16M", "--max-num-batched-tokens", "64"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const norm = (v: ArrayLike<number>): number => Math.hypot(...Array.from(v));

describe("embeddings on the binary", () => {
  test("the start-up log names the pooling the GGUF asked for", () => {
    expect(server.log()).toContain("Embedding model: pooling_type=LAST (gguf), normalize=True");
  });

  test("openai embeddings.create: strings (the client's base64 default) equal the float format; usage counts the prompt tokens", async () => {
    const input = ["The quick brown fox", "jumps over the lazy dog", "RAG on an edge box"];
    const b64 = await client.embeddings.create({ model: MODEL, input });
    const floats = await client.embeddings.create({ model: MODEL, input, encoding_format: "float" });
    expect(b64.object).toBe("list");
    expect(b64.model).toBe(MODEL);
    expect(b64.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const [i, d] of b64.data.entries()) {
      expect(d.object).toBe("embedding");
      expect(d.embedding.length).toBe(256);
      expect(norm(d.embedding)).toBeCloseTo(1, 4);
      // base64 carries the float32 values exactly
      expect(Array.from(d.embedding)).toEqual(Array.from(floats.data[i]!.embedding).map((x) => Math.fround(x)));
    }
    // different texts, different vectors
    expect(Array.from(b64.data[0]!.embedding)).not.toEqual(Array.from(b64.data[1]!.embedding));
    let tokens = 0;
    for (const text of input) {
      const r = await fetch(`${server.url}/tokenize`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: text }) });
      tokens += ((await r.json()) as { count: number }).count;
    }
    expect(b64.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null } as never);
  });

  test("token ids and lists of token ids embed the same as the text they encode", async () => {
    const text = "Embeddings for retrieval";
    const ids = ((await (await fetch(`${server.url}/tokenize`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: text }) })).json()) as { tokens: number[] }).tokens;
    const fromText = await client.embeddings.create({ model: MODEL, input: text, encoding_format: "float" });
    const fromIds = await client.embeddings.create({ model: MODEL, input: ids, encoding_format: "float" });
    const fromLists = await client.embeddings.create({ model: MODEL, input: [ids, ids.slice(0, 2)], encoding_format: "float" });
    expect(fromIds.data[0]!.embedding).toEqual(fromText.data[0]!.embedding);
    expect(fromLists.data[0]!.embedding).toEqual(fromText.data[0]!.embedding);
    expect(fromLists.data[1]!.embedding).not.toEqual(fromText.data[0]!.embedding);
    expect(fromLists.usage.prompt_tokens).toBe(ids.length + 2);
  });

  test("dimensions on a model without matryoshka is vLLM's 400", async () => {
    const error = await client.embeddings.create({ model: MODEL, input: "x", dimensions: 64 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as Error).message).toContain(`Model "${MODEL}" does not support matryoshka representation`);
  });

  test("chat and completions on an embedding model are vLLM's 400", async () => {
    const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    expect((chat as Error).message).toContain("The model does not support Chat Completions API");
    const completion = await client.completions.create({ model: MODEL, prompt: "hi" }).catch((e: unknown) => e);
    expect(completion).toBeInstanceOf(OpenAI.BadRequestError);
    expect((completion as Error).message).toContain("The model does not support Completions API");
  });

  test("/score is the cosine of the two embeddings; /rerank orders documents by it", async () => {
    const post = async (path: string, body: unknown) => (await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json() as Promise<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const docs = ["Paris is in France", "Bananas are yellow", "The capital of France"];
    const e = await client.embeddings.create({ model: MODEL, input: ["capital of France", ...docs], encoding_format: "float" });
    const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);
    const expected = docs.map((_, i) => dot(e.data[0]!.embedding, e.data[i + 1]!.embedding));
    const score = await post("/v1/score", { model: MODEL, text_1: "capital of France", text_2: docs });
    expect(score.data.map((d: { score: number }) => d.score)).toEqual(expected.map((x) => expect.closeTo(x, 5)));
    const rerank = await post("/rerank", { model: MODEL, query: "capital of France", documents: docs, top_n: 2 });
    const order = expected.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i);
    expect(rerank.results.map((r: { index: number }) => r.index)).toEqual(order.slice(0, 2));
  });

  test("/pooling answers the same vectors; the finished requests are counted on /metrics", async () => {
    const before = await (await fetch(`${server.url}/metrics`)).text();
    const response = await fetch(`${server.url}/pooling`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, input: ["a b c", "d e f"] }) });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { object: string; data: { index: number; object: string; data: number[] }[]; usage: { prompt_tokens: number } };
    expect(body.object).toBe("list");
    expect(body.data.map((d) => d.object)).toEqual(["pooling", "pooling"]);
    const viaEmbeddings = await client.embeddings.create({ model: MODEL, input: ["a b c", "d e f"], encoding_format: "float" });
    expect(body.data[1]!.data).toEqual(viaEmbeddings.data[1]!.embedding);
    const after = await (await fetch(`${server.url}/metrics`)).text();
    const success = (text: string): number => Number(/^vllm:request_success_total\{[^}]*finished_reason="stop"[^}]*\} (\S+)$/m.exec(text)?.[1] ?? "0");
    expect(success(after) - success(before)).toBe(4);
  });
});
