/**
 * LoRA adapters behind a several-model server (compiled binary): the command line's --lora-modules belong to the first
 * model, a `--models` entry's to that model; a request naming an adapter is routed to its model (whose engine runs
 * it: the adapter's greedy ids equal a one-model server's with the same adapter), /v1/models lists each adapter with
 * its parent and file, and an adapter named like a model is a bad command line (exit 2). Runtime loads
 * (VLLM_ALLOW_RUNTIME_LORA_UPDATING) go to the model the adapter's shapes fit, or to the one base_model_name names when
 * several fit.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { llamaModelsDir } from "../../scripts/llama-vocab.ts";
import { writeVocabModel } from "../model/llamacpp-models.ts";
import type { TinyShape } from "../model/tiny-model.ts";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

const SHAPE: TinyShape = {
  architecture: "llama", vocabSize: 32000, dim: 128, hiddenDim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, tied: false, contextLength: 256,
};
const dims = { dim: 128, numHeads: 4, numKvHeads: 2, headDim: 32, hiddenDim: 256 };
const SMALL: TinyShape = { ...SHAPE, dim: 64, hiddenDim: 128, headDim: 16 };

let dir = "";
const files: Record<string, string> = {};
const servers: ServerProcess[] = [];

beforeAll(() => {
  llamaModelsDir();
  dir = mkdtempSync(join(tmpdir(), "fennec-lora-models-e2e-"));
  for (const [name, seed] of [["m1", 1], ["m2", 2]] as const) {
    const sub = join(dir, name);
    mkdirSync(sub);
    files[name] = join(dir, `${name}.gguf`);
    renameSync(writeVocabModel(sub, SHAPE, "llama-spm", "q8_0", seed), files[name]);
  }
  for (const [name, seed] of [["poet", 5], ["sql", 6]] as const) {
    files[name] = join(dir, `${name}.gguf`);
    writeGgufFile(files[name], randomLora({ architecture: "llama", numLayers: 2, dims, moe: false, rank: 8, alpha: 16, seed }));
  }
  // a narrower model and an adapter of its shapes
  mkdirSync(join(dir, "small"));
  files.small = join(dir, "small.gguf");
  renameSync(writeVocabModel(join(dir, "small"), SMALL, "llama-spm", "q8_0", 3), files.small);
  files.tiny = join(dir, "tiny.gguf");
  writeGgufFile(files.tiny, randomLora({ architecture: "llama", numLayers: 2, dims: { dim: 64, numHeads: 4, numKvHeads: 2, headDim: 16, hiddenDim: 128 }, moe: false, rank: 8, alpha: 16, seed: 7 }));
}, 120_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

async function greedyIds(url: string, model: string): Promise<{ status: number; ids: number[] }> {
  const r = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model, prompt: "Once upon a time", max_tokens: 10, temperature: 0, return_token_ids: true }) });
  const body = (await r.json()) as { model?: string; choices?: { token_ids: number[] }[] };
  if (r.status === 200) expect(body.model).toBe(model);
  return { status: r.status, ids: body.choices?.[0]?.token_ids ?? [] };
}

describe("LoRA adapters with several models (compiled binary)", () => {
  test("each model's adapters route to it and are listed with it as parent; ids equal a one-model server's", async () => {
    const server = await startServer([files.m1!, "--threads", "1", "--enable-lora", "--lora-modules", `poet=${files.poet}`, "--models", JSON.stringify({ model: files.m2, "lora-modules": [`sql=${files.sql}`] })]);
    servers.push(server);
    const cards = ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; parent: string | null; root: string }[] }).data;
    expect(cards.filter((c) => c.parent !== null).map((c) => [c.id, c.parent, c.root])).toEqual([["poet", "m1", files.poet], ["sql", "m2", files.sql]]);
    const sql = await greedyIds(server.url, "sql");
    const m2 = await greedyIds(server.url, "m2");
    // poet is m1's: m2's app does not know it, so a 200 means the router sent it to m1
    const poet = await greedyIds(server.url, "poet");
    expect([sql.status, m2.status, poet.status]).toEqual([200, 200, 200]);
    expect(sql.ids).not.toEqual(m2.ids);
    await server.stop();

    const single = await startServer([files.m2!, "--threads", "1", "--enable-lora", "--lora-modules", `sql=${files.sql}`]);
    servers.push(single);
    expect((await greedyIds(single.url, "sql")).ids).toEqual(sql.ids);
    await single.stop();
  }, 120_000);

  test("an adapter named like a served model is refused at start-up", async () => {
    const child = Bun.spawn([...serverCommand(), files.m1!, "--enable-lora", "--models", JSON.stringify({ model: files.m2, "lora-modules": [`m1=${files.sql}`] })], { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
    const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
    expect(await child.exited).toBe(2);
    expect(out + err).toContain("--lora-modules m1: that name is a served model's; give the adapter another name");
  }, 60_000);

  test("runtime loads go to the model the adapter fits; base_model_name picks when several fit; /v1/models lists the parent", async () => {
    const server = await startServer([files.m1!, files.m2!, files.small!, "--threads", "1", "--enable-lora"], { env: { VLLM_ALLOW_RUNTIME_LORA_UPDATING: "true" } });
    servers.push(server);
    const load = (body: object) => fetch(`${server.url}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const tiny = await load({ lora_name: "tiny", lora_path: files.tiny });
    expect([tiny.status, await tiny.text()]).toEqual([200, "Success: LoRA adapter 'tiny' added successfully."]);
    const several = await load({ lora_name: "poet", lora_path: files.poet });
    expect(several.status).toBe(400);
    expect(((await several.json()) as { error: { message: string } }).error.message).toBe("Loading lora poet failed: the adapter fits several served models (m1, m2); name one as base_model_name.");
    const named = await load({ lora_name: "poet", lora_path: files.poet, base_model_name: "m2" });
    expect(named.status).toBe(200);
    const cards = ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; parent: string | null }[] }).data;
    expect(cards.filter((c) => c.parent !== null).map((c) => [c.id, c.parent])).toEqual([["tiny", "small"], ["poet", "m2"]]);
    const [poet, m2, small, tinyIds] = [await greedyIds(server.url, "poet"), await greedyIds(server.url, "m2"), await greedyIds(server.url, "small"), await greedyIds(server.url, "tiny")];
    expect([poet.status, m2.status, small.status, tinyIds.status]).toEqual([200, 200, 200, 200]);
    // each adapter changed its own base model's answer
    expect(poet.ids).not.toEqual(m2.ids);
    expect(tinyIds.ids).not.toEqual(small.ids);
    await server.stop();
  }, 120_000);
});
