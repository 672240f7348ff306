/**
 * LoRA in the engine (EngineCore on a real Runner, the reference backend): --max-loras bounds the adapters of the
 * running requests (another adapter's request waits, counted as deferred, while the base model's runs beside), the
 * step stats name the adapters running and waiting, a request naming an unknown adapter is refused with vLLM's 404
 * text, and the prefix cache never hands one adapter's KV blocks to another or to the base model.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { engineConfig, prompt, request, runToCompletion } from "../engine/helpers.ts";
import { makeTinyModel } from "../model/tiny-model.ts";

const model = loadModel(makeTinyModel({ architecture: "llama", vocabSize: 97, dim: 32, hiddenDim: 48, numLayers: 1, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 512 }));
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;
const dir = mkdtempSync(join(tmpdir(), "fennec-lora-engine-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const adapterPath = (name: string, seed: number): string => {
  const path = join(dir, `${name}.gguf`);
  writeGgufFile(path, randomLora({ architecture: "llama", numLayers: 1, dims: config, moe: false, rank: 4, alpha: 8, seed }));
  return path;
};
const modules = [{ name: "a", path: adapterPath("a", 1), baseModelName: null }, { name: "b", path: adapterPath("b", 2), baseModelName: null }];

function engine(maxLoras: number): EngineCore {
  return new EngineCore(new Runner(config, weights, new ReferenceBackend()), engineConfig(), 0, () => performance.now(), 1, {
    lora: { maxLoras, maxLoraRank: 16, maxCpuLoras: 2, modules },
  });
}

describe("LoRA in the engine", () => {
  test("--max-loras 1: b waits (deferred) while a and the base run; the stats name them; then b runs", async () => {
    const e = engine(1);
    const p = prompt(20, 3);
    expect(e.addRequest({ ...request("ra", p, { maxTokens: 4 }), loraName: "a" })).toBeNull();
    expect(e.addRequest({ ...request("rb", p, { maxTokens: 4 }), loraName: "b" })).toBeNull();
    expect(e.addRequest(request("base", p, { maxTokens: 4 }))).toBeNull();
    const first = await e.step();
    expect(first!.stats.lora).toEqual({ maxLoras: 1, running: ["a"], waiting: ["b"] });
    expect(first!.stats.numRunning).toBe(2);
    expect(first!.stats.numWaitingDeferred).toBe(1);
    const { outputs, steps } = await runToCompletion(e);
    expect(steps.some((s) => s.lora?.running.join() === "b")).toBe(true);
    expect(steps.every((s) => (s.lora?.running.length ?? 0) <= 1)).toBe(true);
    expect(steps.at(-1)!.lora).toEqual({ maxLoras: 1, running: [], waiting: [] });
    const tokens = ["ra", "rb", "base"].map((id) => outputs.get(id)!.tokens.join(","));
    expect(new Set(tokens).size).toBe(3); // each adapter changes the tokens
  });

  test("an unknown adapter is vLLM's 404 text; without --enable-lora a LoRA request is refused", () => {
    expect(engine(1).addRequest({ ...request("x", [5, 6]), loraName: "zz" })).toEqual({ code: "lora_not_found", message: "The model `zz` does not exist." });
    const plain = new EngineCore(new Runner(config, weights, new ReferenceBackend()), engineConfig(), 0, () => performance.now(), 1);
    expect(plain.addRequest({ ...request("x", [5, 6]), loraName: "a" })).toMatchObject({ code: "lora_disabled" });
  });

  test("the prefix cache keys blocks by adapter: a's prompt blocks serve a again, never the base or b", async () => {
    const e = engine(2);
    const p = prompt(40, 9);
    const cached = async (id: string, loraName?: string): Promise<number> => {
      e.addRequest({ ...request(id, p, { maxTokens: 1 }), ...(loraName !== undefined ? { loraName } : {}) });
      return (await runToCompletion(e)).outputs.get(id)!.numCachedTokens;
    };
    expect(await cached("a1", "a")).toBe(0);
    expect(await cached("base1")).toBe(0);
    expect(await cached("b1", "b")).toBe(0);
    expect(await cached("a2", "a")).toBe(32);
    expect(await cached("base2")).toBe(32);
  });
});
