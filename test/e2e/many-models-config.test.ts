/**
 * Several models named by a folder and by a --config file (vLLM's YAML of flags, with fennec's `models:` list): a
 * folder serves its model files (not projectors, not the later parts of a split model); each `models:` entry has its
 * own served names, context, KV budget, parsers and keep-alive, and /metrics keeps each model's cache_config_info apart
 * by its model_name; a bad entry is one line and exit 2 before anything loads.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

const MODEL = join(import.meta.dir, "..", "..", "build", "default-model.gguf");
const dir = mkdtempSync(join(tmpdir(), "fennec-many-models-config-"));
const folder = join(dir, "models");
const servers: ServerProcess[] = [];

beforeAll(() => {
  mkdirSync(folder);
  for (const name of ["a.gguf", "b.gguf", "mmproj-a.gguf", "big-00001-of-00002.gguf", "big-00002-of-00002.gguf"]) copyFileSync(MODEL, join(folder, name));
  writeFileSync(join(folder, "notes.txt"), "not a model");
});
afterAll(async () => {
  for (const s of servers) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Card { id: string; root: string; max_model_len: number | null; loaded: boolean }

async function models(url: string): Promise<Card[]> {
  return ((await (await fetch(`${url}/v1/models`)).json()) as { data: Card[] }).data;
}

async function complete(url: string, model: string): Promise<number> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "Once upon a time", max_tokens: 4, temperature: 0 }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** A chat request with a tool and tool_choice auto: 200 only where the model's entry set a tool parser. */
async function autoToolChoice(url: string, model: string): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model, messages: [{ role: "user", content: "hi" }], max_tokens: 4,
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }], tool_choice: "auto",
    }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** Runs `fennec serve` expecting it to refuse its command line: exit code and output. */
async function refused(args: readonly string[]): Promise<{ code: number; output: string }> {
  const child = Bun.spawn([...serverCommand(), ...args], { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
  return { code: await child.exited, output: (out + err).trim() };
}

describe("several models from a folder and a --config file", () => {
  test("a folder serves its model files by name", async () => {
    const server = await startServer([folder, "--threads", "1"]);
    servers.push(server);
    const ids = (await models(server.url)).map((m) => m.id).filter((id) => !id.includes("/"));
    expect(ids).toEqual(["a", "b", "big-00001-of-00002"]);
    expect(await complete(server.url, "b")).toBe(200);
    await server.stop();
  }, 60_000);

  test("each models: entry has its own names, context, KV budget, parsers and keep-alive; cache_config_info per model", async () => {
    const config = join(dir, "models.yaml");
    writeFileSync(config, [
      "max-loaded-models: 2",
      "keep-alive: 10m",
      "threads: 1",
      "models:",
      `  - model: ${join(folder, "a.gguf")}`,
      "    served-model-name: [alpha, alpha-latest]",
      "    max-model-len: 128",
      "    kv-cache-memory: 2M",
      "    tool-call-parser: hermes",
      "    enable-auto-tool-choice: true",
      "    keep_alive: -1",
      `  - ${join(folder, "b.gguf")}`,
      "",
    ].join("\n"));
    const server = await startServer(["--config", config], { env: { VLLM_SERVER_DEV_MODE: "1" } });
    servers.push(server);
    expect((await models(server.url)).map((m) => m.id).filter((id) => !id.includes("/"))).toEqual(["alpha", "alpha-latest", "b"]);
    expect(await complete(server.url, "alpha-latest")).toBe(200);
    expect(await complete(server.url, "b")).toBe(200);
    const cards = await models(server.url);
    expect(cards.find((m) => m.id === "alpha")!.max_model_len).toBe(128);
    expect(cards.find((m) => m.id === "b")!.max_model_len).not.toBe(128);
    expect(await autoToolChoice(server.url, "alpha")).toBe(200);
    expect(await autoToolChoice(server.url, "b")).toBe(400);
    // alpha is kept forever (Ollama shows a far-future expiry), b for the server's 10 minutes
    const ps = ((await (await fetch(`${server.url}/api/ps`)).json()) as { models: { name: string; expires_at: string }[] }).models;
    expect(ps.find((m) => m.name === "alpha")!.expires_at.startsWith("2318")).toBe(true);
    const bExpiry = Date.parse(ps.find((m) => m.name === "b")!.expires_at) - Date.now();
    expect(bExpiry).toBeGreaterThan(8 * 60_000);
    expect(bExpiry).toBeLessThan(11 * 60_000);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const infos = metrics.split("\n").filter((l) => l.startsWith("vllm:cache_config_info{"));
    expect(infos).toHaveLength(2);
    const alphaInfo = infos.find((l) => l.includes('model_name="alpha"'))!;
    const bInfo = infos.find((l) => l.includes('model_name="b"'))!;
    // the 2 MiB KV budget holds fewer blocks than b's default
    const blocks = (line: string) => Number(/num_gpu_blocks="(\d+)"/.exec(line)![1]);
    expect(blocks(alphaInfo)).toBeLessThan(blocks(bInfo));
    // vLLM's dev route resets the prefix cache of the model ?model= names
    expect((await fetch(`${server.url}/reset_prefix_cache?model=b`, { method: "POST" })).status).toBe(200);
    expect(server.log()).toContain("Resetting prefix cache...");
    // every vLLM series of a model names it
    for (const line of metrics.split("\n").filter((l) => l.startsWith("vllm:"))) expect(line).toContain("model_name=");
    await server.stop();
  }, 60_000);

  test("a bad entry or key is one line and exit 2", async () => {
    const cases: [string, RegExp][] = [
      [`models:\n  - model: ${join(folder, "a.gguf")}\n    port: 9000\n`, /^fennec: models\[0\]: unknown key port \(a model's keys: model, /],
      [`models:\n  - served-model-name: x\n`, /^fennec: models\[0\]: needs model/],
      [`models:\n  - model: ${join(folder, "a.gguf")}\n    max-model-len: lots\n`, /^fennec: models\[0\]: --max-model-len needs an integer/],
      [`models:\n  - model: ${join(folder, "a.gguf")}\n    tool-call-parser: nope\n  - ${join(folder, "b.gguf")}\n`, /^fennec: model .*a\.gguf: invalid tool call parser: nope/],
      [`modles:\n  - ${join(folder, "a.gguf")}\n`, /^fennec: --config .*: unknown option modles$/],
      [`models:\n  - model: ${join(folder, "a.gguf")}\n    served-model-name: same\n  - model: ${join(folder, "b.gguf")}\n    served-model-name: same\n`, /^fennec: the served model name "same" is given twice/],
    ];
    for (const [yaml, expected] of cases) {
      const path = join(dir, "bad.yaml");
      writeFileSync(path, yaml);
      const { code, output } = await refused(["--config", path, "--port", "0"]);
      expect({ code, output }).toEqual({ code: 2, output: expect.stringMatching(expected) });
      expect(output.split("\n")).toHaveLength(1);
    }
  }, 60_000);
});
