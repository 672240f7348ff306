/**
 * LoRA serving against the compiled binary, with the openai SDK (vLLM's contract: the request's `model` names an
 * adapter; vllm/entrypoints/openai/models/serving.py, vllm/v1/metrics/loggers.py):
 *  - /v1/models lists the base then each adapter (root = its file, parent = its base model);
 *  - chat completions and responses pick adapters by `model` too and answer with the adapter's name;
 *  - base, adapter A and adapter B interleaved concurrently (--max-loras 2: one step holds both adapters and the base)
 *    give every request the greedy token ids it gets alone, and the three differ (each adapter changes the output);
 *  - with --max-loras 1, A and B cannot share a step: vllm:lora_requests_info shows one running while the other waits
 *    (the labels the Gateway API Inference Extension's endpoint picker reads), then neither;
 *  - VLLM_ALLOW_RUNTIME_LORA_UPDATING=true: load an adapter at run time, use it, unload it (then a 404), with vLLM's
 *    texts and errors (a runtime-loaded adapter survives sleep and wake-up); without it the routes do not exist.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import { writeVocabModel } from "../model/llamacpp-models.ts";
import type { TinyShape } from "../model/tiny-model.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

const SHAPE: TinyShape = {
  architecture: "llama", vocabSize: 32000, dim: 128, hiddenDim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, tied: false, contextLength: 256,
};
const dims = { dim: 128, numHeads: 4, numKvHeads: 2, headDim: 32, hiddenDim: 256 };
const PROMPTS = ["Once upon a time", "The lighthouse keeper climbed", "In a quiet village by the sea"];

let dir = "";
let model = "";
const adapter = (name: string, rank: number, seed: number): string => {
  const path = join(dir, `${name}.gguf`);
  writeGgufFile(path, randomLora({ architecture: "llama", numLayers: 2, dims, moe: false, rank, alpha: 2 * rank, seed }));
  return path;
};
let paths: Record<string, string> = {};
const servers: ServerProcess[] = [];

beforeAll(() => {
  llamaModelsDir();
  dir = mkdtempSync(join(tmpdir(), "fennec-lora-e2e-"));
  model = writeVocabModel(dir, SHAPE, "llama-spm", "q8_0", 1);
  paths = { a: adapter("a", 8, 1), b: adapter("b", 16, 2), c: adapter("c", 8, 3) };
}, 120_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

async function serve(args: string[], env: Record<string, string> = {}): Promise<{ server: ServerProcess; client: OpenAI }> {
  const server = await startServer([model, "--threads", "1", "--enable-lora", ...args], { env });
  servers.push(server);
  return { server, client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0, timeout: 120_000 }) };
}

/** the HTTP status a call ends with (the SDK's promise is a thenable bun's `rejects` does not follow) */
async function statusOf(call: PromiseLike<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (e) {
    return (e as { status?: number }).status ?? -1;
  }
}

async function greedyIds(client: OpenAI, modelName: string, prompt: string, maxTokens = 12): Promise<number[]> {
  const r = await client.completions.create({ model: modelName, prompt, max_tokens: maxTokens, temperature: 0, return_token_ids: true } as never);
  expect(r.model).toBe(modelName);
  const ids = (r.choices[0] as unknown as { token_ids?: number[] }).token_ids;
  if (ids === undefined) throw new Error(`no token_ids in ${JSON.stringify(r)}`);
  return ids;
}

describe("LoRA serving (compiled binary)", () => {
  test("models list, and base / A / B interleaved concurrently give each request its alone tokens", async () => {
    const { client } = await serve(["--lora-modules", `a=${paths.a}`, JSON.stringify({ name: "b", path: paths.b, base_model_name: "the-base" }), "--max-loras", "2", "--max-num-seqs", "9"]);
    const models = await client.models.list();
    expect(models.data.map((m) => [m.id, (m as unknown as { parent: string | null }).parent, (m as unknown as { root: string }).root])).toEqual([
      [model, null, model], ["a", model, paths.a], ["b", "the-base", paths.b],
    ]);
    const names = [model, "a", "b"];
    const alone = new Map<string, number[]>();
    for (const name of names) for (const p of PROMPTS) alone.set(`${name} ${p}`, await greedyIds(client, name, p));
    // the three models differ on every prompt
    for (const p of PROMPTS) expect(new Set(names.map((n) => alone.get(`${n} ${p}`)!.join(","))).size).toBe(3);
    // all nine at once, interleaved: they share steps (max-num-seqs 9, two adapters and the base in one step)
    const jobs = PROMPTS.flatMap((p) => names.map((n) => ({ n, p })));
    const together = await Promise.all(jobs.map(({ n, p }) => greedyIds(client, n, p)));
    jobs.forEach(({ n, p }, i) => expect(together[i]).toEqual(alone.get(`${n} ${p}`)!));
    // chat completions and responses pick the adapter the same way, and answer with its name
    const chatA = await client.chat.completions.create({ model: "a", messages: [{ role: "user", content: PROMPTS[0]! }], max_tokens: 8, temperature: 0 });
    const chatBase = await client.chat.completions.create({ model, messages: [{ role: "user", content: PROMPTS[0]! }], max_tokens: 8, temperature: 0 });
    expect(chatA.model).toBe("a");
    expect(chatA.choices[0]!.message.content).not.toBe(chatBase.choices[0]!.message.content);
    const responseB = await client.responses.create({ model: "b", input: PROMPTS[1]!, max_output_tokens: 8, temperature: 0 });
    expect(responseB.model).toBe("b");
    expect(responseB.output_text.length).toBeGreaterThan(0);
    // an unknown model is vLLM's 404
    expect(await statusOf(client.completions.create({ model: "nope", prompt: "x", max_tokens: 1 }))).toBe(404);
    // the runtime routes are not there without VLLM_ALLOW_RUNTIME_LORA_UPDATING
    const load = await fetch(`${client.baseURL}/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ lora_name: "c", lora_path: paths.c }) });
    expect(load.status).toBe(404);
  }, 240_000);

  test("vllm:lora_requests_info: with --max-loras 1 one adapter runs while the other waits", async () => {
    const { server, client } = await serve(["--lora-modules", `a=${paths.a}`, `b=${paths.b}`, "--max-loras", "1"]);
    const series = async (): Promise<{ labels: Record<string, string>; value: number }[]> => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      return [...text.matchAll(/^vllm:lora_requests_info\{([^}]*)\} (\S+)$/gm)].map((m) => ({
        labels: Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!])), value: Number(m[2]),
      }));
    };
    expect(await series()).toEqual([]); // created with the first update, as vLLM's
    const jobs = ["a", "b", "a", "b"].map((n) => greedyIds(client, n, PROMPTS[0]!, 24));
    await Promise.all(jobs);
    // an answer can reach the client before the engine's next stats update (the one that finds it finished)
    const settled = (all: { labels: Record<string, string>; value: number }[]): boolean => {
      const newest = all.reduce((a, b) => (b.value > a.value ? b : a));
      return newest.labels.running_lora_adapters === "" && newest.labels.waiting_lora_adapters === "";
    };
    let seen = await series();
    for (let i = 0; i < 50 && !settled(seen); i++) { await Bun.sleep(100); seen = await series(); }
    for (const s of seen) expect(Object.keys(s.labels).sort()).toEqual(["max_lora", "running_lora_adapters", "waiting_lora_adapters"]);
    expect(seen.every((s) => s.labels.max_lora === "1")).toBe(true);
    // never two adapters running at once; at some update one ran while the other waited
    expect(seen.every((s) => !s.labels.running_lora_adapters!.includes(","))).toBe(true);
    expect(seen.some((s) => s.labels.running_lora_adapters !== "" && s.labels.waiting_lora_adapters !== "" && s.labels.running_lora_adapters !== s.labels.waiting_lora_adapters)).toBe(true);
    // the newest series (the largest value: how the endpoint picker reads it) says nothing runs or waits now
    const newest = seen.reduce((a, b) => (b.value > a.value ? b : a));
    expect([newest.labels.running_lora_adapters, newest.labels.waiting_lora_adapters]).toEqual(["", ""]);
    expect(Math.abs(newest.value - Date.now() / 1000)).toBeLessThan(60);
  }, 240_000);

  test("runtime load and unload (VLLM_ALLOW_RUNTIME_LORA_UPDATING=true)", async () => {
    const { server, client } = await serve(["--max-loras", "2", "--enable-sleep-mode"], { VLLM_ALLOW_RUNTIME_LORA_UPDATING: "true", VLLM_SERVER_DEV_MODE: "1" });
    const post = (route: string, body: unknown) => fetch(`${client.baseURL}/${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect(await statusOf(client.completions.create({ model: "c", prompt: "x", max_tokens: 1 }))).toBe(404);
    const loaded = await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c });
    expect([loaded.status, await loaded.text()]).toEqual([200, "Success: LoRA adapter 'c' added successfully."]);
    const again = await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c });
    expect(again.status).toBe(400);
    expect((await again.json()).error.type).toBe("InvalidUserInput");
    const missing = await post("load_lora_adapter", { lora_name: "d", lora_path: join(dir, "none.gguf") });
    expect([missing.status, (await missing.json()).error.message]).toEqual([404, `Loading lora d failed: No adapter found for ${join(dir, "none.gguf")}`]);
    const notAdapter = await post("load_lora_adapter", { lora_name: "d", lora_path: model });
    expect(notAdapter.status).toBe(400);
    expect((await notAdapter.json()).error.message).toContain("not a LoRA adapter");
    expect((await post("load_lora_adapter", { lora_name: "d" })).status).toBe(400);
    const withC = await greedyIds(client, "c", PROMPTS[1]!);
    const base = await greedyIds(client, model, PROMPTS[1]!);
    expect(withC).not.toEqual(base);
    expect((await client.models.list()).data.map((m) => m.id)).toEqual([model, "c"]);
    // sleep mode restarts the engine: a runtime-loaded adapter is registered in the new one, with the same tokens
    expect((await fetch(`${server.url}/sleep?level=1`, { method: "POST" })).status).toBe(200);
    expect((await fetch(`${server.url}/wake_up`, { method: "POST" })).status).toBe(200);
    expect(await greedyIds(client, "c", PROMPTS[1]!)).toEqual(withC);
    const unloaded = await post("unload_lora_adapter", { lora_name: "c" });
    expect([unloaded.status, await unloaded.text()]).toEqual([200, "Success: LoRA adapter 'c' removed successfully."]);
    const gone = await post("unload_lora_adapter", { lora_name: "c" });
    expect([gone.status, (await gone.json()).error.message]).toEqual([404, "The lora adapter 'c' cannot be found."]);
    expect(await statusOf(client.completions.create({ model: "c", prompt: "x", max_tokens: 1 }))).toBe(404);
  }, 240_000);
});
