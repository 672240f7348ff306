/**
 * vLLM's hybrid KV cache manager on a tiny random gemma3 (6 layers: 4 sliding with window 8, 2 full; block size 4)
 * through the real engine and runner: the groups vLLM's rule gives; greedy ids and every logit identical with the
 * hybrid manager on and off, and equal to the oracle (reference-forward.ts); a long request's sliding groups hold a
 * bounded number of blocks while its full group grows; freed blocks serve another request; prefix-cache hits give
 * the same outputs; preemption and abort free everything; --disable-hybrid-kv-cache-manager and the automatic
 * turn-off say so in one line; a model without sliding layers keeps one group and the same block counts.
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { EngineCore } from "../../src/engine/engine-core.ts";
import { resolveEngineConfig, type EngineConfig } from "../../src/engine/engine-sizing.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import { RequestState } from "../../src/engine/request.ts";
import { chooseKvCacheGroups } from "../../src/engine/hybrid-kv-cache.ts";
import { parseKvTransfer } from "../../src/config/kv-transfer-config.ts";
import { parseSpeculativeConfig } from "../../src/config/speculative-config.ts";
import { placeModel } from "../../src/engine/model-placement.ts";
import { factsText, inspectModel } from "../../src/commands/inspect.ts";
import { kvCacheGroups } from "../../src/model/kv-cache-groups.ts";
import { KvCacheManager } from "../../src/engine/kv-cache-manager.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { NULL_BLOCK, type BatchLogits, type ModelBatch, type ModelRunner } from "../../src/model/model-batch.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import type { ModelWeights } from "../../src/model/weights.ts";
import { makeTinyModel, TINY_SHAPES, type TinyShape } from "../model/tiny-model.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { engineConfig } from "../../src/command-line/engine-config.ts";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { collect, prompt, request, type Collected } from "./helpers.ts";

await ensureKernels();

const WINDOW = 8;
const BLOCK = 4;
// sliding layers 0, 1, 3, 4 (pattern 3: layers 2 and 5 are global): vLLM's rule gives full [2,5], sliding [0,3], [1,4]
const SHAPE: TinyShape = {
  architecture: "gemma3", vocabSize: 61, dim: 32, hiddenDim: 64, numLayers: 6, numHeads: 4, numKvHeads: 1, headDim: 16,
  tied: true, contextLength: 128, slidingWindow: WINDOW, slidingWindowPattern: 3,
};

function load(shape: TinyShape): { config: ModelConfig; weights: ModelWeights } {
  const model = loadModel(makeTinyModel(shape, { seed: 5 }));
  if (!model.ok) throw new Error(model.error);
  return model.value;
}
const GEMMA = load(SHAPE);

const ARGS: EngineArgs = {
  maxNumSeqs: 8, maxNumBatchedTokens: 16, maxModelLen: null, blockSize: BLOCK, kvCacheMemoryBytes: null, enablePrefixCaching: true,
  threads: 1, device: "cpu",
};

/** Every logit row the runner returned, in call order (the whole data path the engine sampled from). */
class RecordingRunner implements ModelRunner {
  readonly rows: Float32Array[] = [];
  constructor(private readonly inner: Runner) {}
  get config(): ModelConfig { return this.inner.config; }
  kvBytesPerBlock(blockSize: number, numLayers?: number): number { return this.inner.kvBytesPerBlock(blockSize, numLayers); }
  allocateKvCache(...a: Parameters<Runner["allocateKvCache"]>): void { this.inner.allocateKvCache(...a); }
  async execute(batch: ModelBatch): Promise<BatchLogits> {
    const out = await this.inner.execute(batch);
    this.rows.push(out.logits.slice());
    return out;
  }
  exportKvBlocks(ids: Int32Array): Uint8Array { return this.inner.exportKvBlocks(ids); }
  importKvBlocks(ids: Int32Array, data: Uint8Array): void { this.inner.importKvBlocks(ids, data); }
  dispose(): void { this.inner.dispose(); }
}

async function makeEngine(backend: "reference" | "wasm", args: Partial<EngineArgs> = {}, kvDtype: "f16" | "q8" = "f16"): Promise<{ engine: EngineCore; runner: RecordingRunner; config: EngineConfig }> {
  const b = backend === "wasm" ? await createBackend({ kind: "wasm", threads: 1 }) : new ReferenceBackend();
  const runner = new RecordingRunner(new Runner(GEMMA.config, GEMMA.weights, b, undefined, kvDtype));
  const config = resolveEngineConfig({ ...ARGS, numKvBlocksOverride: 200, ...args }, runner, 1e9, 1e10);
  if (!config.ok) throw new Error(config.error);
  return { engine: new EngineCore(runner, config.value, 0, () => performance.now(), 7), runner, config: config.value };
}

/** Steps to the end; `each` sees the engine after every step. */
async function run(engine: EngineCore, each?: () => void): Promise<{ outputs: Map<string, Collected>; numPreempted: number }> {
  const outputs = new Map<string, Collected>();
  let numPreempted = 0;
  while (engine.hasWork()) {
    const r = await engine.step();
    if (r === null) throw new Error("nothing scheduled");
    numPreempted += r.stats.numPreempted;
    collect(outputs, r.deltas);
    each?.();
  }
  return { outputs, numPreempted };
}

const LONG = prompt(56, 3, SHAPE.vocabSize); // 7 windows
const MAX_TOKENS = 24;

function heldPerGroup(engine: EngineCore, req: RequestState): number[] {
  return engine.kv.groups.map((_, g) => engine.kv.numHeldBlocks(req, g));
}

describe("KV cache groups (vLLM _get_kv_cache_groups_uniform_page_size)", () => {
  const config = (numLayers: number, period: number): ModelConfig => ({
    ...GEMMA.config, numLayers, slidingWindow: 512, slidingLayers: Array.from({ length: numLayers }, (_, l) => l % period !== period - 1),
  });

  test("gemma3-270m: 15 sliding + 3 full layers -> 6 groups of 3, full first, layers interleaved", () => {
    const g = kvCacheGroups(config(18, 6));
    expect(g.groupSize).toBe(3);
    expect(g.groups.map((x) => [x.slidingWindow, ...x.layers])).toEqual([
      [0, 5, 11, 17], [512, 0, 6, 12], [512, 1, 7, 13], [512, 2, 8, 14], [512, 3, 9, 15], [512, 4, 10, 16],
    ]);
    expect(g.layerGroup[7]).toBe(2);
    expect(g.layerSlot[7]).toBe(1);
  });

  test("gemma3-1b: 22 sliding + 4 full -> groups of 4, the last sliding groups padded", () => {
    const g = kvCacheGroups(config(26, 6));
    expect(g.groupSize).toBe(4);
    expect(g.groups.map((x) => x.layers.length)).toEqual([4, 4, 4, 4, 4, 3, 3]);
    expect(new Set(g.groups.flatMap((x) => x.layers)).size).toBe(26);
  });

  test("a model without sliding layers keeps one group of every layer, silently, whatever the flags", () => {
    const llama = load(TINY_SHAPES.llama!).config;
    for (const args of [{}, { disableHybridKvCacheManager: true }]) {
      const choice = chooseKvCacheGroups(llama, args);
      expect(choice.groups.groups).toHaveLength(1);
      expect(choice.groups.groupSize).toBe(llama.numLayers);
      expect(choice.offLine).toBeNull();
    }
  });
});

describe("the KV cache manager with a full and a sliding group (window 8, block 4)", () => {
  const groups = kvCacheGroups({ ...GEMMA.config, numLayers: 2, slidingLayers: [false, true], slidingWindow: WINDOW });
  const state = (id: string, tokens: number[]): RequestState => new RequestState(request(id, tokens), 128, 0, 1);

  test("a sliding group's hit needs cdiv(window - 1, block) cached blocks before its end: the hit shrinks to the last such run", () => {
    const kv = new KvCacheManager({ numBlocks: 22, blockSize: BLOCK, enablePrefixCaching: true, kvCacheGroups: groups });
    const tokens = prompt(41, 2, SHAPE.vocabSize);
    const a = state("a", tokens);
    expect(kv.allocateSlots(a, 41)!.map((ids) => ids.length)).toEqual([11, 11]);
    const slidingIds = [...a.blockTables[1]!];
    a.numComputedTokens = 41;
    kv.cacheFullBlocks(a);
    // the next allocation frees the sliding blocks behind position 41's window (keys 34..41): blocks 0-7
    kv.allocateSlots(a, 1);
    expect(a.blockTables[1]!.slice(0, 9).map((id) => id === NULL_BLOCK)).toEqual([true, true, true, true, true, true, true, true, false]);
    expect(kv.numHeldBlocks(a)).toBe(11 + 3);
    kv.free(a);
    expect(kv.pool.numFreeBlocks).toBe(22);
    // nothing evicted: a prompt sharing the first 26 tokens hits 6 blocks; the sliding group needs only blocks 4, 5
    const shared = [...tokens.slice(0, 26), ...prompt(15, 4, SHAPE.vocabSize)];
    const hit = kv.getComputedBlocks(state("b", shared));
    expect(hit.numTokens).toBe(24);
    expect(hit.blockTables[1]!.slice(0, 4)).toEqual([NULL_BLOCK, NULL_BLOCK, NULL_BLOCK, NULL_BLOCK]);
    expect(hit.blockTables[1]!.length).toBe(6);
    // evict the sliding group's block 5 (still cached while free): the sliding run ending at block 4 (blocks 3, 4) is
    // the longest hit, and the full group's is cut to it
    const s5 = kv.getComputedBlocks(state("probe", shared)).blockTables[1]![5]!;
    for (let id = 0; id < 22; id++) if (id !== s5) { kv.pool.touch(id); kv.pool.release([id]); }
    kv.pool.release(kv.pool.allocate(1)!);
    const shrunk = kv.getComputedBlocks(state("c", shared));
    expect(shrunk.numTokens).toBe(20);
    expect(shrunk.blockTables[0]).toHaveLength(5);
    expect(shrunk.blockTables[1]!.slice(3)).toEqual([slidingIds[3]!, slidingIds[4]!]);
    expect(s5).toBe(slidingIds[5]!);
    expect(shrunk.blockTables[1]!.slice(0, 3)).toEqual([NULL_BLOCK, NULL_BLOCK, NULL_BLOCK]);
    // admitted with that hit: only the live blocks are taken; freeing gives every one back
    const c = state("c2", shared);
    const computed = kv.getComputedBlocks(c);
    expect(kv.allocateSlots(c, shared.length - computed.numTokens, computed)).not.toBeNull();
    expect(kv.numHeldBlocks(c, 1)).toBe(Math.ceil(shared.length / BLOCK) - 3);
    kv.free(c);
    expect(kv.pool.numFreeBlocks).toBe(22);
  });
});

describe("the runner with KV cache groups", () => {
  test("a null entry behind the window is accepted, one the chunk's rows can see is an engine bug and throws", async () => {
    const runner = new Runner(GEMMA.config, GEMMA.weights, new ReferenceBackend());
    runner.allocateKvCache(32, BLOCK, kvCacheGroups(GEMMA.config));
    const tokens = Int32Array.from(prompt(24, 1, SHAPE.vocabSize));
    const tables = [Int32Array.from([0, 1, 2, 3, 4, 5, 6]), Int32Array.from([7, 8, 9, 10, 11, 12, 13]), Int32Array.from([14, 15, 16, 17, 18, 19, 20])];
    await runner.execute({ sequences: [{ tokenIds: tokens, startPos: 0, blockTable: tables[0]!, blockTables: tables, logits: "none" }] });
    // position 24 sees keys 17..24: blocks 0-3 (positions 0..15) are behind the window of both sliding groups
    const nulled = tables.map((t, g) => (g === 0 ? t : Int32Array.from(t, (id, b) => (b < 4 ? NULL_BLOCK : id))));
    const next = Int32Array.of(5);
    const a = await runner.execute({ sequences: [{ tokenIds: next, startPos: 24, blockTable: nulled[0]!, blockTables: nulled, logits: "last" }] });
    const b = await runner.execute({ sequences: [{ tokenIds: next, startPos: 24, blockTable: tables[0]!, blockTables: tables, logits: "last" }] });
    expect(a.logits).toEqual(b.logits);
    const tooMany = tables.map((t, g) => (g === 1 ? Int32Array.from(t, (id, b) => (b < 5 ? NULL_BLOCK : id)) : t));
    await expect(runner.execute({ sequences: [{ tokenIds: next, startPos: 24, blockTable: tooMany[0]!, blockTables: tooMany, logits: "last" }] })).rejects.toThrow(/block id -1 out of range \[0, 32\) in group 1/);
    const fullNull = tables.map((t, g) => (g === 0 ? Int32Array.from(t, (id, b) => (b === 0 ? NULL_BLOCK : id)) : t));
    await expect(runner.execute({ sequences: [{ tokenIds: next, startPos: 24, blockTable: fullNull[0]!, blockTables: fullNull, logits: "last" }] })).rejects.toThrow(/in group 0/);
    runner.dispose();
  });
});

describe.each(["reference", "wasm"] as const)("tiny gemma3 through the engine (%s backend)", (backend) => {
  test("hybrid on == off: greedy ids and every logit row bit for bit, and both equal the oracle", async () => {
    const on = await makeEngine(backend);
    const off = await makeEngine(backend, { disableHybridKvCacheManager: true });
    expect(on.engine.kv.groups.map((g) => g.slidingWindow)).toEqual([0, WINDOW, WINDOW]);
    expect(off.engine.kv.groups).toHaveLength(1);
    const outs: number[][] = [];
    for (const e of [on, off]) {
      e.engine.addRequest(request("long", LONG, { maxTokens: MAX_TOKENS, ignoreEos: true }));
      outs.push((await run(e.engine)).outputs.get("long")!.tokens);
      expect(e.engine.kv.pool.numFreeBlocks).toBe(200);
    }
    expect(outs[0]).toHaveLength(MAX_TOKENS);
    expect(outs[0]).toEqual(outs[1]!);
    expect(on.runner.rows.length).toBe(off.runner.rows.length);
    on.runner.rows.forEach((r, i) => expect(r).toEqual(off.runner.rows[i]!));
    // the oracle, teacher-forced along the generated ids: the logits at the last prompt position and every decode step
    const ref = new ReferenceForward(GEMMA.config, GEMMA.weights, LONG.length + MAX_TOKENS);
    const all = [...LONG, ...outs[0]!];
    const got = on.runner.rows.filter((r) => r.length > 0);
    expect(got).toHaveLength(MAX_TOKENS);
    let maxDiff = 0;
    for (let p = 0; p < all.length - 1; p++) {
      const expected = ref.forward(all[p]!, p);
      if (p < LONG.length - 1) continue;
      const row = got[p - (LONG.length - 1)]!;
      for (let v = 0; v < expected.length; v++) maxDiff = Math.max(maxDiff, Math.abs(row[v]! - expected[v]!));
    }
    expect(maxDiff).toBeLessThan(backend === "wasm" ? 3e-3 : 1e-4);
    on.runner.dispose();
    off.runner.dispose();
  });

  test("a long request's sliding groups stay bounded while its full group grows; freed blocks serve another request", async () => {
    // 40 blocks of 2 layers: the KV bytes of 13 blocks of all 6 layers (52 positions), yet they serve 80 positions and more
    const { engine, runner } = await makeEngine(backend, { numKvBlocksOverride: 40 });
    engine.addRequest(request("long", LONG, { maxTokens: MAX_TOKENS, ignoreEos: true }));
    // a second request arrives later and must be given blocks the long one's sliding groups gave back
    const freedByLong = new Set<number>();
    let numPreempted = 0;
    let previous: number[][] = [];
    let maxSliding = 0;
    let steps = 0;
    let reused = 0;
    numPreempted = (await run(engine, () => {
      steps++;
      const long = engine.scheduler.running.find((r) => r.requestId === "long");
      if (long !== undefined) {
        const held = heldPerGroup(engine, long);
        // full group: every block of the computed positions (and the next step's)
        expect(held[0]).toBeGreaterThanOrEqual(Math.ceil(long.numComputedTokens / BLOCK));
        maxSliding = Math.max(maxSliding, held[1]!, held[2]!);
        previous.forEach((table, g) => table.forEach((id, b) => { if (id !== NULL_BLOCK && long.blockTables[g]![b] === NULL_BLOCK) freedByLong.add(id); }));
        previous = long.blockTables.map((t) => [...t]);
      }
      if (steps === 8) engine.addRequest(request("late", prompt(20, 9, SHAPE.vocabSize), { maxTokens: 4, ignoreEos: true }));
      const late = engine.scheduler.running.find((r) => r.requestId === "late");
      if (late !== undefined) for (const t of late.blockTables) for (const id of t) if (freedByLong.has(id)) reused++;
    })).numPreempted;
    expect(numPreempted).toBe(0);
    // window 8 + a 16-token step = 6 blocks of 4, plus one: vLLM's bound; decode steps hold at most cdiv(7, 4) + 1 = 3
    expect(maxSliding).toBeLessThanOrEqual(Math.ceil((WINDOW - 1 + ARGS.maxNumBatchedTokens) / BLOCK) + 1);
    expect(freedByLong.size).toBeGreaterThan(10);
    expect(reused).toBeGreaterThan(0);
    expect(engine.kv.pool.numFreeBlocks).toBe(40);
    runner.dispose();
    // the same bytes without the hybrid manager: 13 blocks of every layer cannot hold the request at all
    const off = await makeEngine(backend, { numKvBlocksOverride: 13, disableHybridKvCacheManager: true });
    expect(off.engine.addRequest(request("long", LONG, { maxTokens: MAX_TOKENS, ignoreEos: true }))?.code).toBe("kv_cache_too_small");
    off.runner.dispose();
  });
});

test("wasm, 8-bit KV cache: hybrid on == off, every logit row bit for bit", async () => {
  const rows: Float32Array[][] = [];
  for (const disableHybridKvCacheManager of [false, true]) {
    const { engine, runner } = await makeEngine("wasm", { disableHybridKvCacheManager }, "q8");
    engine.addRequest(request("long", LONG, { maxTokens: 16, ignoreEos: true }));
    await run(engine);
    rows.push(runner.rows);
    runner.dispose();
  }
  expect(rows[0]!.length).toBe(rows[1]!.length);
  rows[0]!.forEach((r, i) => expect(r).toEqual(rows[1]![i]!));
});

describe("tiny gemma3: prefix cache, preemption, abort, pool size (reference backend)", () => {
  test("a prefix-cache hit gives the same output as the first run, with cached tokens", async () => {
    const { engine, runner } = await makeEngine("reference");
    engine.addRequest(request("first", LONG, { maxTokens: 12, ignoreEos: true }));
    const first = (await run(engine)).outputs.get("first")!;
    engine.addRequest(request("again", LONG, { maxTokens: 12, ignoreEos: true }));
    const again = (await run(engine)).outputs.get("again")!;
    // every full prompt block but the last (one token is always computed): the sliding groups' window blocks are cached
    expect(again.numCachedTokens).toBe(Math.floor((LONG.length - 1) / BLOCK) * BLOCK);
    expect(again.tokens).toEqual(first.tokens);
    // a prompt that shares only the first 30 tokens hits at most its last full shared block, and still matches a cold run
    const forked = [...LONG.slice(0, 30), ...prompt(20, 11, SHAPE.vocabSize)];
    engine.addRequest(request("forked", forked, { maxTokens: 8, ignoreEos: true }));
    const hit = (await run(engine)).outputs.get("forked")!;
    expect(hit.numCachedTokens).toBe(28);
    const cold = await makeEngine("reference", { enablePrefixCaching: false });
    cold.engine.addRequest(request("forked", forked, { maxTokens: 8, ignoreEos: true }));
    expect((await run(cold.engine)).outputs.get("forked")!.tokens).toEqual(hit.tokens);
    expect(engine.kv.pool.numFreeBlocks).toBe(200);
    runner.dispose();
    cold.runner.dispose();
  });

  test("preemption under a small pool frees everything and recomputes to the same ids; abort frees at once", async () => {
    const alone = await makeEngine("reference");
    alone.engine.addRequest(request("a", LONG, { maxTokens: 16, ignoreEos: true }));
    const expected = (await run(alone.engine)).outputs.get("a")!.tokens;
    // 60 blocks: each long request holds up to 18 full + 2 x 7 sliding blocks of its own, so four at once cannot all fit
    const small = await makeEngine("reference", { numKvBlocksOverride: 60 });
    for (let i = 0; i < 4; i++) small.engine.addRequest(request(`r${i}`, LONG, { maxTokens: 16, ignoreEos: true, cacheSalt: `s${i}` }));
    const { outputs, numPreempted } = await run(small.engine);
    expect(numPreempted).toBeGreaterThan(0);
    for (let i = 0; i < 4; i++) expect(outputs.get(`r${i}`)!.tokens).toEqual(expected);
    expect(small.engine.kv.pool.numFreeBlocks).toBe(60);
    // abort in the middle of decoding: every group's blocks are free when abort returns
    small.engine.addRequest(request("gone", LONG, { maxTokens: 40, ignoreEos: true }));
    for (let i = 0; i < 6; i++) await small.engine.step();
    const gone = small.engine.scheduler.running[0]!;
    expect(heldPerGroup(small.engine, gone).every((n) => n > 0)).toBe(true);
    small.engine.abort(["gone"]);
    expect(small.engine.kv.pool.numFreeBlocks).toBe(60);
    expect(gone.blockTables).toEqual([]);
    alone.runner.dispose();
    small.runner.dispose();
  });

  test("speculative decoding (ngram) with the hybrid manager: drafts are verified and the ids stay the greedy ones", async () => {
    // a prompt that repeats itself, so prompt lookup drafts often; rejections roll the computed tokens back
    const repeating = [...LONG.slice(0, 12), ...LONG.slice(0, 12), ...LONG.slice(0, 12), ...LONG.slice(0, 12)];
    const plain = await makeEngine("reference", { disableHybridKvCacheManager: true });
    plain.engine.addRequest(request("r", repeating, { maxTokens: 24, ignoreEos: true }));
    const expected = (await run(plain.engine)).outputs.get("r")!.tokens;
    const spec = parseSpeculativeConfig({ method: "ngram", num_speculative_tokens: 3, prompt_lookup_max: 3, prompt_lookup_min: 1 });
    if (!spec.ok) throw new Error(spec.error);
    const { engine, runner } = await makeEngine("reference", { speculativeConfig: spec.value });
    expect(engine.kv.groups).toHaveLength(3);
    engine.addRequest(request("r", repeating, { maxTokens: 24, ignoreEos: true }));
    let numDraftTokens = 0;
    const outputs = new Map<string, Collected>();
    while (engine.hasWork()) {
      const r = (await engine.step())!;
      numDraftTokens += r.stats.specDecoding?.numDraftTokens ?? 0;
      collect(outputs, r.deltas);
    }
    expect(numDraftTokens).toBeGreaterThan(0);
    expect(outputs.get("r")!.tokens).toEqual(expected);
    expect(engine.kv.pool.numFreeBlocks).toBe(200);
    runner.dispose();
    plain.runner.dispose();
  });

  test("a pd handoff (exportKv -> importKv) carries every group's blocks and decodes the same ids", async () => {
    const plain = await makeEngine("reference");
    plain.engine.addRequest(request("r", LONG, { maxTokens: 12, ignoreEos: true }));
    const expected = (await run(plain.engine)).outputs.get("r")!.tokens;
    const prefill = await makeEngine("reference");
    prefill.engine.addRequest({ ...request("p", LONG, { maxTokens: 1, ignoreEos: true }), exportKv: true });
    const first = (await run(prefill.engine)).outputs.get("p")!;
    const kv = first.deltas.find((d) => d.kv !== undefined)!.kv!;
    expect(kv.numTokens).toBe(LONG.length);
    // three groups' blocks for 14 block positions, of 2 layers each
    expect(kv.data.length).toBe(3 * 14 * prefill.runner.kvBytesPerBlock(BLOCK, 2));
    const decode = await makeEngine("reference");
    expect(decode.engine.addRequest({ ...request("d", [...LONG, first.tokens[0]!], { maxTokens: 11, ignoreEos: true }), importKv: kv })).toBeNull();
    const rest = (await run(decode.engine)).outputs.get("d")!.tokens;
    expect([first.tokens[0]!, ...rest]).toEqual(expected);
    expect(decode.engine.kv.pool.numFreeBlocks).toBe(200);
    for (const e of [plain, prefill, decode]) e.runner.dispose();
  });

  test("the same KV memory holds 3x the blocks (groups of 2 of 6 layers); the start-up lines say so", async () => {
    const bytes = 1 << 20;
    const on = await makeEngine("reference", { numKvBlocksOverride: null, kvCacheMemoryBytes: bytes });
    const off = await makeEngine("reference", { numKvBlocksOverride: null, kvCacheMemoryBytes: bytes, disableHybridKvCacheManager: true });
    expect(on.config.numBlocks).toBe(Math.floor(bytes / on.runner.kvBytesPerBlock(BLOCK, 2)));
    expect(off.config.numBlocks).toBe(Math.floor(bytes / off.runner.kvBytesPerBlock(BLOCK)));
    expect(on.config.numBlocks).toBeGreaterThanOrEqual(3 * off.config.numBlocks);
    expect(on.config.kvCacheLines![0]).toBe(`KV cache groups: 3 of 2 layers (0 full [2,5]; 1 sliding ${WINDOW} [0,3]; 2 sliding ${WINDOW} [1,4])`);
    expect(off.config.kvCacheLines![0]).toMatch(/^Hybrid KV cache manager disabled by --disable-hybrid-kv-cache-manager: sliding-window layers keep every KV block/);
    // vLLM: tokens = blocks / groups x block size; concurrency = blocks / (a max-model-len request's blocks over all groups)
    const maxLen = SHAPE.contextLength;
    const perRequestOn = maxLen / BLOCK + 2 * (Math.ceil((WINDOW - 1 + ARGS.maxNumBatchedTokens) / BLOCK) + 1);
    expect(on.config.kvCacheLines).toContain(`KV cache size: ${(Math.floor(on.config.numBlocks / 3) * BLOCK).toLocaleString("en-US")} tokens`);
    expect(on.config.kvCacheLines).toContain(`Maximum concurrency for ${maxLen} tokens per request: ${(on.config.numBlocks / perRequestOn).toFixed(2)}x`);
    expect(off.config.kvCacheLines).toContain(`Maximum concurrency for ${maxLen} tokens per request: ${(off.config.numBlocks / (maxLen / BLOCK)).toFixed(2)}x`);
    on.runner.dispose();
    off.runner.dispose();
  });

  test("every layer sliding (pattern 0): one sliding group, which frees too, with the same output", async () => {
    const allSliding = load({ ...SHAPE, numLayers: 2, slidingWindowPattern: 0 });
    const outs: number[][] = [];
    let maxHeld = 0;
    for (const disableHybridKvCacheManager of [false, true]) {
      const runner = new Runner(allSliding.config, allSliding.weights, new ReferenceBackend());
      const config = resolveEngineConfig({ ...ARGS, numKvBlocksOverride: 100, disableHybridKvCacheManager }, runner, 1e9, 1e10);
      if (!config.ok) throw new Error(config.error);
      const engine = new EngineCore(runner, config.value, 0, () => performance.now(), 7);
      expect(engine.kv.groups.map((g) => g.slidingWindow)).toEqual([disableHybridKvCacheManager ? 0 : WINDOW]);
      engine.addRequest(request("long", LONG, { maxTokens: 16, ignoreEos: true }));
      outs.push((await run(engine, () => {
        const r = engine.scheduler.running[0];
        if (r !== undefined && !disableHybridKvCacheManager) maxHeld = Math.max(maxHeld, engine.kv.numHeldBlocks(r));
      })).outputs.get("long")!.tokens);
      expect(engine.kv.pool.numFreeBlocks).toBe(100);
      runner.dispose();
    }
    expect(outs[0]).toEqual(outs[1]!);
    expect(maxHeld).toBeLessThanOrEqual(Math.ceil((WINDOW - 1 + ARGS.maxNumBatchedTokens) / BLOCK) + 1);
  });

  test("start-up placement sizes the pool by the group's bytes; over several wasm32 memories the hybrid manager is off", async () => {
    // the wasm backend's f16 cache: the bytes placement plans with
    const runner = new Runner(GEMMA.config, GEMMA.weights, await createBackend({ kind: "wasm", threads: 1 }));
    const args: EngineArgs = { ...ARGS, kvCacheMemoryBytes: 1 << 20 };
    const one = placeModel(GEMMA.config, GEMMA.weights, args, {}, 1e10, 1e11);
    if (!one.ok) throw new Error(one.error);
    expect(one.value.numMemories).toBe(1);
    expect(one.value.kvBlocks).toBe(Math.floor((1 << 20) / runner.kvBytesPerBlock(BLOCK, 2)));
    expect(one.value.line).toEndWith(`; ${one.value.kvBlocks} KV blocks of ${BLOCK} tokens`);
    const engine = resolveEngineConfig(args, runner, 1e10, 1e11, 0, one.value);
    if (!engine.ok) throw new Error(engine.error);
    expect(engine.value.numBlocks).toBe(one.value.kvBlocks);
    expect(engine.value.kvCacheGroups!.groups).toHaveLength(3);
    // a 96 MiB pool in memories of at most 64 MiB: the split backend places layers per memory, so one table
    const bigArgs: EngineArgs = { ...ARGS, kvCacheMemoryBytes: 96 << 20 };
    const split = placeModel(GEMMA.config, GEMMA.weights, bigArgs, { FENNEC_WASM_MEMORY_BYTES: "64M" }, 1e10, 1e11);
    if (!split.ok) throw new Error(split.error);
    expect(split.value.numMemories).toBeGreaterThan(1);
    expect(split.value.kvBlocks).toBe(Math.floor((96 << 20) / runner.kvBytesPerBlock(BLOCK)));
    const off = resolveEngineConfig(bigArgs, runner, 1e10, 1e11, 0, split.value);
    if (!off.ok) throw new Error(off.error);
    expect(off.value.kvCacheGroups!.groups).toHaveLength(1);
    expect(off.value.kvCacheLines![0]).toMatch(new RegExp(`^Turning off hybrid kv cache manager because the model is spread over ${split.value.numMemories} wasm32 memories`));
    runner.dispose();
  });

  test("fennec inspect gives a sliding-window model's full-context KV bytes with the hybrid manager too", () => {
    const facts = inspectModel(makeTinyModel(SHAPE, { seed: 5 }), null);
    if (!facts.ok) throw new Error(facts.error);
    const perTokenLayer = facts.value.memory.kv_bytes_per_token / SHAPE.numLayers;
    // 128 positions: the full group's 8 blocks of 16 and each sliding group's min(8, cdiv(7 + 2048, 16) + 1) = 8: no saving
    // at this length, so the figure equals 3 groups x 8 blocks x 16 x 2 layers
    expect(facts.value.memory.kv_bytes_full_context_hybrid).toBe(3 * 8 * 16 * 2 * perTokenLayer);
    const long = inspectModel(makeTinyModel({ ...SHAPE, contextLength: 4096 }, { seed: 5 }), null);
    if (!long.ok) throw new Error(long.error);
    // 4,096 positions: 256 full blocks + 2 x 130 sliding blocks (cdiv(7 + 2048, 16) + 1: serve's default step of
    // 2,048 tokens), of 2 layers each, against 256 blocks of 6 layers
    expect(long.value.memory.kv_bytes_full_context_hybrid).toBe((256 + 2 * 130) * 16 * 2 * perTokenLayer);
    expect(long.value.memory.kv_bytes_full_context).toBe(256 * 16 * 6 * perTokenLayer);
    expect(factsText(long.value)).toContain("hybrid KV cache manager");
    const llama = inspectModel(makeTinyModel(TINY_SHAPES.llama!, { seed: 5 }), null);
    expect(llama.ok && llama.value.memory.kv_bytes_full_context_hybrid).toBeUndefined();
  });

  test("--disable-hybrid-kv-cache-manager reaches the engine args; absent, it is off", () => {
    for (const [argv, want] of [[["--disable-hybrid-kv-cache-manager"], true], [[], false]] as const) {
      const options = parseCommandArgs("serve", [...argv]);
      if (!options.ok) throw new Error(options.error);
      const args = engineConfig(options.value, {});
      if (!args.ok) throw new Error(args.error);
      expect(args.value.engine.disableHybridKvCacheManager).toBe(want);
    }
  });

  test("a KV connector turns the hybrid manager off with one line, as vLLM does", () => {
    const offload = parseKvTransfer({ kvOffloadingSize: 0.01, kvOffloadingBackend: "native", kvTransferConfig: null, useSimpleKvOffload: false, sideChannelHost: null, sideChannelPort: null, enablePrefixCaching: true }, BLOCK);
    if (!offload.ok) throw new Error(offload.error);
    const choice = chooseKvCacheGroups(GEMMA.config, { kvOffload: offload.value.config });
    expect(choice.groups.groups).toHaveLength(1);
    expect(choice.offLine).toMatch(/^Turning off hybrid kv cache manager because `--kv-offloading-size` is set/);
    expect(chooseKvCacheGroups(GEMMA.config, {}, 2).offLine).toMatch(/spread over 2 wasm32 memories/);
    const draft = chooseKvCacheGroups(GEMMA.config, { speculativeConfig: { method: "draft_model" } as NonNullable<EngineArgs["speculativeConfig"]> });
    expect(draft.offLine).toMatch(/^Turning off hybrid kv cache manager because the draft model/);
    expect(draft.groups.groups).toHaveLength(1);
    expect(chooseKvCacheGroups(GEMMA.config, {}).offLine).toBeNull();
  });
});
