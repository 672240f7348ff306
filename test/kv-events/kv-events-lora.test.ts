/**
 * KV events of requests that run with a LoRA adapter (vLLM BlockPool._build_block_stored_event): BlockStored carries
 * the adapter's lora_int_id as lora_id and its served name as lora_name (a runtime-loaded adapter its own id), the
 * adapter's name is the blocks' extra key (so the hashes differ from the base model's), a prefix-cache hit of the
 * adapter's blocks names it again; blocks of the base model carry null for both. Real runner (reference backend) on a
 * tiny random model, since the adapter's slots need one.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { staticLoraIntId } from "../../src/config/lora-config.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { BlockHasher, externalBlockHash, noneHash } from "../../src/kv-events/block-hash.ts";
import type { BlockStored, KvCacheEvent } from "../../src/kv-events/kv-events.ts";
import { encodeKvEventBatch } from "../../src/kv-events/kv-events.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";
import { randomLora } from "../../scripts/random-lora.ts";
import { engineConfig, prompt, request } from "../engine/helpers.ts";
import { makeTinyModel } from "../model/tiny-model.ts";
import { decode } from "@msgpack/msgpack";

const BLOCK = 16;
const model = loadModel(makeTinyModel({ architecture: "llama", vocabSize: 97, dim: 32, hiddenDim: 48, numLayers: 1, numHeads: 4, numKvHeads: 2, headDim: 8, tied: true, contextLength: 512 }));
if (!model.ok) throw new Error(model.error);
const { config, weights } = model.value;
const dir = mkdtempSync(join(tmpdir(), "fennec-kv-events-lora-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const adapterPath = (name: string, seed: number): string => {
  const path = join(dir, `${name}.gguf`);
  writeGgufFile(path, randomLora({ architecture: "llama", numLayers: 1, dims: config, moe: false, rank: 4, alpha: 8, seed }));
  return path;
};
const modules = [{ name: "a", path: adapterPath("a", 1), baseModelName: null }, { name: "b", path: adapterPath("b", 2), baseModelName: null }];

function engine(): EngineCore {
  return new EngineCore(new Runner(config, weights, new ReferenceBackend()), engineConfig(), 0, () => performance.now(), 1, {
    lora: { maxLoras: 2, maxLoraRank: 16, maxCpuLoras: 3, modules },
    blockHashing: { algo: "sha256", seed: "0" },
    kvEvents: { intHashes: true },
  });
}

/** runs one request alone to the end; its BlockStored events */
async function storedBy(e: EngineCore, id: string, p: number[], loraName?: string): Promise<BlockStored[]> {
  expect(e.addRequest({ ...request(id, p, { maxTokens: 1 }), ...(loraName !== undefined ? { loraName } : {}) })).toBeNull();
  const events: KvCacheEvent[] = [];
  for (let i = 0; i < 1000 && e.hasWork(); i++) {
    await e.step();
    events.push(...e.takeKvEvents());
  }
  return events.filter((ev): ev is BlockStored => ev.type === "BlockStored");
}

const hashes = (tokens: readonly number[], extra: string | null) =>
  new BlockHasher("sha256", noneHash("sha256", "0")).hashFullBlocks(tokens, BLOCK, [], () => (extra === null ? null : [extra])).map((d) => externalBlockHash(d, true));

describe("KV events with LoRA adapters", () => {
  test("an adapter's blocks name it (lora_id, lora_name, extra key); the base model's carry null", async () => {
    const e = engine();
    const p = prompt(40, 5);
    const a = await storedBy(e, "ra", p, "a");
    expect(a.length).toBeGreaterThan(0);
    expect(a[0]).toMatchObject({ blockHashes: hashes(p, "a"), loraId: staticLoraIntId(0), loraName: "a", extraKeys: [["a"], ["a"]] });
    expect(a.every((s) => s.loraId === 1 && s.loraName === "a")).toBe(true);
    const b = await storedBy(e, "rb", p, "b");
    expect(b[0]).toMatchObject({ blockHashes: hashes(p, "b"), loraId: 2, loraName: "b" });
    const base = await storedBy(e, "base", p);
    expect(base[0]).toMatchObject({ blockHashes: hashes(p, null), loraId: null, loraName: null, extraKeys: [null, null] });
    // the base model's hashes are not the adapter's
    expect(base[0]!.blockHashes).not.toEqual(a[0]!.blockHashes);
    // a prefix-cache hit of a's blocks announces them again, still naming a
    const again = await storedBy(e, "ra2", p, "a");
    expect(again[0]).toMatchObject({ blockHashes: hashes(p, "a"), parentBlockHash: null, loraId: 1, loraName: "a" });
  });

  test("a runtime-loaded adapter's blocks carry the id it was loaded with; on the wire both fields are set", async () => {
    const e = engine();
    expect(e.loadLora("c", adapterPath("c", 3), 7)).toBeNull();
    const p = prompt(33, 6);
    const c = await storedBy(e, "rc", p, "c");
    expect(c[0]).toMatchObject({ blockHashes: hashes(p, "c"), loraId: 7, loraName: "c" });
    const wire = decode(encodeKvEventBatch({ ts: 1, events: [c[0]!], dataParallelRank: 0 }), { useBigInt64: true }) as [number, Record<string, unknown>[], number];
    expect(wire[1][0]).toMatchObject({ type: "BlockStored", lora_id: 7, lora_name: "c", extra_keys: [["c"], ["c"]] });
  });
});
