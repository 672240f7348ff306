/**
 * The engine's adapter bookkeeping (lora/lora-manager.ts): --max-loras slots reused least recently used first but
 * never for an adapter the same step uses, --max-cpu-loras parsed adapters kept (a dropped one is read again from its
 * file), unregister frees the slot. The host is a recorder of uploads: the slots' kernels are tested in lora-batch.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import type { LoraAdapter } from "../../src/lora/lora-adapter.ts";
import { LoraManager } from "../../src/lora/lora-manager.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { makeTinyModel } from "../model/tiny-model.ts";

const model = loadModel(makeTinyModel({ architecture: "llama", vocabSize: 64, dim: 32, hiddenDim: 48, numLayers: 1, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 32 }));
if (!model.ok) throw new Error(model.error);
const config = model.value.config;
const dir = mkdtempSync(join(tmpdir(), "fennec-lora-manager-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const write = (name: string, rank = 4): string => {
  const path = join(dir, `${name}.gguf`);
  writeGgufFile(path, randomLora({ architecture: "llama", numLayers: 1, dims: config, moe: false, rank, alpha: 8, seed: name.charCodeAt(0) }));
  return path;
};

function host() {
  const events: string[] = [];
  return {
    events,
    enableLora: (n: number) => void events.push(`enable ${n}`),
    loadLora: (slot: number, a: LoraAdapter) => void events.push(`load ${slot} ${a.source.split("/").at(-1)}`),
    unloadLora: (slot: number) => void events.push(`unload ${slot}`),
  };
}

describe("LoraManager", () => {
  test("slots: loaded once, reused least recently used first, never for an adapter of the same step", () => {
    const h = host();
    const m = new LoraManager({ maxLoras: 2, maxLoraRank: 16, maxCpuLoras: 3, modules: [] }, config, h);
    for (const [i, n] of ["a", "b", "c"].entries()) expect(m.register(n, write(n), 10 + i).ok).toBe(true);
    expect(["a", "b", "c", "zz"].map((n) => m.idOf(n))).toEqual([10, 11, 12, null]);
    expect(m.slotsFor(new Set(["a", "b"]))).toEqual({ ok: true, value: new Map([["a", 0], ["b", 1]]) });
    expect(m.slotsFor(new Set(["b"]))).toEqual({ ok: true, value: new Map([["b", 1]]) });
    // c takes a's slot (a was used longest ago), b stays
    expect(m.slotsFor(new Set(["b", "c"]))).toEqual({ ok: true, value: new Map([["b", 1], ["c", 0]]) });
    expect(m.slotsFor(new Set(["a", "b", "c"]))).toMatchObject({ ok: false, error: "a step holds 3 LoRA adapters, max_loras is 2" });
    expect(h.events).toEqual(["enable 2", "load 0 a.gguf", "load 1 b.gguf", "load 0 c.gguf"]);
    expect(m.unregister("c")).toBe(true);
    expect(m.unregister("c")).toBe(false);
    expect(h.events.at(-1)).toBe("unload 0");
    expect(m.has("c")).toBe(false);
    expect(m.idOf("c")).toBeNull();
    // a load in place keeps the name with the id the server gives it
    expect(m.register("a", write("a2"), 10).ok).toBe(true);
    expect(m.idOf("a")).toBe(10);
  });

  test("host memory keeps --max-cpu-loras adapters; a dropped one is read again, and a vanished file is the step's one line", () => {
    const m = new LoraManager({ maxLoras: 1, maxLoraRank: 16, maxCpuLoras: 1, modules: [] }, config, host());
    const pathD = write("d");
    expect(m.register("d", pathD, 1).ok).toBe(true);
    expect(m.register("e", write("e"), 2).ok).toBe(true); // d leaves host memory
    expect(m.slotsFor(new Set(["d"])).ok).toBe(true); // read again from its file
    expect(m.slotsFor(new Set(["e"])).ok).toBe(true);
    unlinkSync(pathD);
    const r = m.slotsFor(new Set(["d"])); // e is the one in host memory now: d must be read, and its file is gone
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(/^LoRA adapter .*d\.gguf/);
  });

  test("register refuses an adapter above --max-lora-rank or for another shape, leaving the name unknown", () => {
    const m = new LoraManager({ maxLoras: 1, maxLoraRank: 8, maxCpuLoras: 1, modules: [] }, config, host());
    const r = m.register("big", write("big", 16), 1);
    expect(r).toMatchObject({ ok: false, error: expect.stringContaining("LoRA rank 16 is greater than max_lora_rank 8") });
    expect(m.has("big")).toBe(false);
  });
});
