/**
 * The runtime LoRA routes over a real engine (EngineCore on the reference backend): vLLM's lora_int_id numbering
 * (--lora-modules 1..n, each runtime load the next, load_inplace keeps it), unload's lora_int_id checked against the
 * named adapter, and every field either used or refused with a 400 (is_3d_lora_weight true, unknown fields, bad types).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Elysia } from "elysia";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { errorPlugin } from "../../src/server/errors.ts";
import { LoraAdapters, loraRoutes } from "../../src/server/lora-routes.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { engineConfig } from "../engine/helpers.ts";
import { makeTinyModel } from "../model/tiny-model.ts";

const model = loadModel(makeTinyModel({ architecture: "llama", vocabSize: 97, dim: 32, hiddenDim: 48, numLayers: 1, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 256 }));
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;
const dir = mkdtempSync(join(tmpdir(), "fennec-lora-routes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const adapterPath = (name: string, seed: number): string => {
  const path = join(dir, `${name}.gguf`);
  writeGgufFile(path, randomLora({ architecture: "llama", numLayers: 1, dims: config, moe: false, rank: 4, alpha: 8, seed }));
  return path;
};
const paths = { a: adapterPath("a", 1), b: adapterPath("b", 2), c: adapterPath("c", 3), d: adapterPath("d", 4) };
const modules = [{ name: "a", path: paths.a, baseModelName: null }, { name: "b", path: paths.b, baseModelName: "base" }];

/** the routes over a real engine; `loads` records what the engine was asked to register */
function served() {
  const core = new EngineCore(new Runner(config, weights, new ReferenceBackend()), engineConfig(), 0, () => performance.now(), 1, {
    lora: { maxLoras: 2, maxLoraRank: 16, maxCpuLoras: 4, modules },
  });
  const loads: [string, number][] = [];
  const adapters = new LoraAdapters({
    loadLora: async (name, path, id) => { loads.push([name, id]); return core.loadLora(name, path, id); },
    unloadLora: async (name) => core.unloadLora(name),
  }, "served", true, modules);
  const app = new Elysia().use(errorPlugin(() => {})).use(loraRoutes(adapters));
  const post = async (route: string, body: unknown) => {
    const r = await app.handle(new Request(`http://localhost/v1/${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
    const text = await r.text();
    return { status: r.status, text: r.status === 200 ? text : ((e) => ({ message: e.message, type: e.type }))((JSON.parse(text) as { error: { message: string; type: string } }).error) };
  };
  return { adapters, loads, post };
}

describe("LoRA runtime routes", () => {
  test("lora_int_id: modules 1..n, runtime loads continue, load_inplace keeps the id, unload never frees a number", async () => {
    const { adapters, loads, post } = served();
    expect(adapters.list().map((c) => [c.name, c.id, c.parent, c.baseModelName])).toEqual([["a", 1, "served", null], ["b", 2, "base", "base"]]);
    expect(await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c })).toEqual({ status: 200, text: "Success: LoRA adapter 'c' added successfully." });
    expect(adapters.card("c")?.id).toBe(3);
    expect((await post("load_lora_adapter", { lora_name: "b", lora_path: paths.d, load_inplace: true })).status).toBe(200);
    expect(adapters.card("a")).toEqual({ name: "a", id: 1, path: paths.a, parent: "served", baseModelName: null, loadInplace: false });
    // vLLM's in-place load makes a new LoRARequest (no base_model_name, load_inplace true) under the same id
    expect(adapters.card("b")).toEqual({ name: "b", id: 2, path: paths.d, parent: "served", baseModelName: null, loadInplace: true });
    expect((await post("unload_lora_adapter", { lora_name: "c" })).status).toBe(200);
    expect((await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c, load_inplace: false })).status).toBe(200);
    expect(adapters.card("c")?.id).toBe(4);
    expect(loads).toEqual([["c", 3], ["b", 2], ["c", 4]]);
  });

  test("unload: lora_int_id must be the named adapter's; then it unloads", async () => {
    const { adapters, post } = served();
    expect(await post("unload_lora_adapter", { lora_name: "a", lora_int_id: 2 })).toEqual({ status: 400, text: { message: "lora_int_id 2 is not the lora adapter 'a' (its lora_int_id is 1).", type: "InvalidUserInput" } });
    expect(adapters.has("a")).toBe(true);
    expect(await post("unload_lora_adapter", { lora_name: "a", lora_int_id: "1" })).toMatchObject({ status: 400, text: { message: 'lora_int_id must be an integer (got "1").' } });
    expect(await post("unload_lora_adapter", { lora_name: "a", lora_int_id: 1 })).toEqual({ status: 200, text: "Success: LoRA adapter 'a' removed successfully." });
    expect(adapters.has("a")).toBe(false);
    expect(await post("unload_lora_adapter", { lora_name: "b", lora_int_id: null })).toMatchObject({ status: 200 });
    expect(await post("unload_lora_adapter", { lora_int_id: 2 })).toMatchObject({ status: 400, text: { message: "'lora_name' needs to be provided to unload a LoRA adapter." } });
    expect(await post("unload_lora_adapter", { lora_name: "b" })).toEqual({ status: 404, text: { message: "The lora adapter 'b' cannot be found.", type: "NotFoundError" } });
  });

  test("fields: is_3d_lora_weight true, unknown fields and non-boolean flags are 400s; nothing is loaded", async () => {
    const { adapters, loads, post } = served();
    const three = await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c, is_3d_lora_weight: true });
    expect([three.status, (three.text as { message: string }).message]).toEqual([400, expect.stringContaining("is_3d_lora_weight is not supported")]);
    expect(await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c, scale: 0.5 })).toMatchObject({ status: 400, text: { message: "Unknown field 'scale' (fields: lora_name, lora_path, load_inplace, is_3d_lora_weight)." } });
    expect(await post("unload_lora_adapter", { lora_name: "a", force: true })).toMatchObject({ status: 400, text: { message: "Unknown field 'force' (fields: lora_name, lora_int_id)." } });
    expect(await post("load_lora_adapter", { lora_name: "a", lora_path: paths.c, load_inplace: "yes" })).toMatchObject({ status: 400, text: { message: 'load_inplace must be a boolean (got "yes").' } });
    expect(loads).toEqual([]);
    expect(adapters.has("c")).toBe(false);
    expect((await post("load_lora_adapter", { lora_name: "c", lora_path: paths.c, is_3d_lora_weight: false })).status).toBe(200);
  });
});
