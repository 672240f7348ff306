/**
 * LoRA adapters on Ollama's routes, through the `ollama` library against the real server (the compiled binary when it
 * is built from the current sources): Ollama shows a model built with an ADAPTER as a model of its own whose
 * `details.parent_model` is its base, so /api/tags lists each served adapter (--lora-modules and runtime-loaded) with
 * its parent, /api/ps lists it while its base is loaded, /api/show answers for it with its parent and a FROM + ADAPTER
 * Modelfile, and /api/generate and /api/chat naming it run the base with the adapter (the OpenAI routes' greedy text
 * for the adapter, not the base's). With several models, the adapters of a model not loaded are listed too, and /api/ps lists
 * an adapter once its base is loaded. Every record is checked against Ollama's schemas (test/server/ollama-schemas.ts).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import { writeVocabModel } from "../model/llamacpp-models.ts";
import type { TinyShape } from "../model/tiny-model.ts";
import { checkOllama } from "../server/ollama-schemas.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(120_000);

const SHAPE: TinyShape = {
  architecture: "llama", vocabSize: 32000, dim: 128, hiddenDim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, tied: false, contextLength: 256,
};
const dims = { dim: 128, numHeads: 4, numKvHeads: 2, headDim: 32, hiddenDim: 256 };
const PROMPT = "Once upon a time";
const GREEDY = { temperature: 0, num_predict: 10 };

let dir = "";
const files: Record<string, string> = {};
const servers: ServerProcess[] = [];

beforeAll(() => {
  llamaModelsDir();
  dir = mkdtempSync(join(tmpdir(), "fennec-ollama-adapters-e2e-"));
  for (const [name, seed] of [["m1", 1], ["m2", 2]] as const) {
    mkdirSync(join(dir, name));
    files[name] = join(dir, `${name}.gguf`);
    renameSync(writeVocabModel(join(dir, name), SHAPE, "llama-spm", "q8_0", seed), files[name]);
  }
  for (const [name, seed] of [["poet", 5], ["sql", 6]] as const) {
    files[name] = join(dir, `${name}.gguf`);
    // a large alpha: the adapter's change shows in the greedy text
    writeGgufFile(files[name], randomLora({ architecture: "llama", numLayers: 2, dims, moe: false, rank: 8, alpha: 256, seed }));
  }
}, 120_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

async function start(args: string[], env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = await startServer([...args, "--threads", "1", "--max-model-len", "256"], { env });
  servers.push(server);
  return server;
}

async function completionText(url: string, model: string): Promise<string> {
  const r = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model, prompt: PROMPT, max_tokens: GREEDY.num_predict, temperature: 0 }) });
  expect(r.status).toBe(200);
  return ((await r.json()) as { choices: { text: string }[] }).choices[0]!.text;
}

const parentsOf = (models: readonly { name: string; details: { parent_model: string } }[]) => Object.fromEntries(models.map((m) => [m.name, m.details.parent_model]));

describe("LoRA adapters on Ollama's routes (the ollama library)", () => {
  test("one model: /api/tags, /api/ps and /api/show show each adapter with its parent; /api/generate and /api/chat run it", async () => {
    const server = await start([files.m1!, "--served-model-name", "m1", "--enable-lora", "--lora-modules", `poet=${files.poet}`], { VLLM_ALLOW_RUNTIME_LORA_UPDATING: "true" });
    const ollama = new Ollama({ host: server.url });
    const list = await ollama.list();
    checkOllama("tags", list);
    expect(parentsOf(list.models)).toEqual({ "m1:latest": "", "poet:latest": "m1:latest" });
    expect(list.models.find((m) => m.name === "poet:latest")!.details.family).toBe("llama");
    // a model of its own: its digest is not its base's
    expect(list.models[0]!.digest).not.toBe(list.models[1]!.digest);

    // a runtime-loaded adapter joins the lists
    const load = await fetch(`${server.url}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ lora_name: "sql", lora_path: files.sql }) });
    expect(load.status).toBe(200);
    expect(parentsOf((await ollama.list()).models)).toEqual({ "m1:latest": "", "poet:latest": "m1:latest", "sql:latest": "m1:latest" });
    const ps = await ollama.ps();
    checkOllama("ps", ps);
    expect(parentsOf(ps.models)).toEqual({ "m1:latest": "", "poet:latest": "m1:latest", "sql:latest": "m1:latest" });

    const show = await ollama.show({ model: "Poet" });
    checkOllama("show", show);
    expect(show.details.parent_model).toBe("m1:latest");
    expect(show.modelfile).toContain("FROM m1:latest\n");
    expect(show.modelfile).toContain(`ADAPTER ${files.poet}\n`);
    expect((await ollama.show({ model: "m1" })).details.parent_model).toBe("");

    // the adapter's name runs the base with the adapter: the OpenAI route's text for the adapter, not the base's
    const generate = async (model: string) => (await ollama.generate({ model, prompt: PROMPT, raw: true, options: GREEDY })).response;
    const [poet, base] = [await generate("poet"), await generate("m1")];
    expect(poet).toBe(await completionText(server.url, "poet"));
    expect(base).toBe(await completionText(server.url, "m1"));
    expect(poet).not.toBe(base);
    // /api/chat picks it the same way: the OpenAI chat route's answer for the adapter
    const chat = await ollama.chat({ model: "poet:latest", messages: [{ role: "user", content: PROMPT }], options: GREEDY });
    const openai = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "poet", messages: [{ role: "user", content: PROMPT }], max_tokens: GREEDY.num_predict, temperature: 0 }) });
    expect(chat.message.content).toBe(((await openai.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content);
    expect(chat.message.content).not.toBe((await ollama.chat({ model: "m1", messages: [{ role: "user", content: PROMPT }], options: GREEDY })).message.content);
  });

  test("several models: an adapter is listed with its parent loaded or not, in /api/ps once its base is loaded", async () => {
    const server = await start([files.m1!, "--models", JSON.stringify({ model: files.m2, "lora-modules": [`sql=${files.sql}`] }), "--enable-lora", "--max-loaded-models", "1"]);
    const ollama = new Ollama({ host: server.url });
    // nothing loaded: every model and adapter is listed, and listing loads none
    const list = await ollama.list();
    checkOllama("tags", list);
    expect(parentsOf(list.models)).toEqual({ "m1:latest": "", "m2:latest": "", "sql:latest": "m2:latest" });
    expect((await ollama.ps()).models).toEqual([]);

    // a request naming the adapter (Ollama's form) loads its base: /api/ps lists both
    const sql = (await ollama.generate({ model: "sql:latest", prompt: PROMPT, raw: true, options: GREEDY })).response;
    const ps = await ollama.ps();
    checkOllama("ps", ps);
    expect(parentsOf(ps.models)).toEqual({ m2: "", sql: "m2:latest" });
    // the loaded model's entries come from its app (its GGUF's facts); the other's from its name
    const loaded = await ollama.list();
    checkOllama("tags", loaded);
    // (the loaded app lists the model under each of its names: the path as given is one)
    expect(parentsOf(loaded.models)).toEqual({ "m1:latest": "", "m2:latest": "", [`${files.m2}:latest`]: "", "sql:latest": "m2:latest" });
    expect(loaded.models.find((m) => m.name === "sql:latest")!.details.family).toBe("llama");
    expect((await ollama.show({ model: "sql" })).details.parent_model).toBe("m2:latest");
    expect(sql).toBe(await completionText(server.url, "sql"));

    // m1 takes the only slot: m2 and its adapter leave /api/ps
    await ollama.generate({ model: "m1", prompt: PROMPT, raw: true, options: GREEDY });
    expect(parentsOf((await ollama.ps()).models)).toEqual({ m1: "" });
  });
});
