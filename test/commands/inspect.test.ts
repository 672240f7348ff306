// `fennec inspect` against what fennec then allocates: for every make-model tiny shape (all four architectures'
// flags: tied/untied output, QKV bias, QK norm, GQA) with one layer and every make-model type (each weight type and the
// q4_k_m mix, with make-model's own per-tensor fallbacks), the weights' heap figure equals the bytes the WASM backend
// takes when the model's weights are loaded, and the KV figure the bytes one position takes in its cache. The vocab
// is cut to 320 tokens so 52 models build in seconds (inspect then reports the cut tokenizer as unusable, which it
// is). One real make-model file goes through the CLI as a process, in text and --json.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MEMORY_SLACK_BYTES } from "../../src/backend/wasm/memory-plan.ts";
import { createWasmBackend, type WasmBackend } from "../../src/backend/wasm/wasm-backend.ts";
import { inspectModel } from "../../src/commands/inspect.ts";
import { GgufValueType, type GgufFile, type GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { KEY } from "../../src/gguf/names.ts";
import { parseGguf, readGguf } from "../../src/gguf/reader.ts";
import { serializeGguf } from "../../src/gguf/writer.ts";
import { BatchedForward } from "../../src/model/forward.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { WEIGHT_TYPES } from "../../src/tensor/dtypes.ts";
import { MODEL_SHAPES, vocabPath, type ModelShape } from "../../scripts/model-shapes.ts";
import { MIXED_TYPES, randomModel } from "../../scripts/random-model.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { serverCommand } from "../e2e/server-process.ts";

const TYPES = [...WEIGHT_TYPES.map((w) => w.name), ...MIXED_TYPES];
const TINY = Object.keys(MODEL_SHAPES).filter((s) => s.startsWith("tiny-"));
const VOCAB_TOKENS = 320;

/** the vocab file's tokenizer metadata with every per-token array cut to the first VOCAB_TOKENS entries */
function cutVocab(vocab: GgufFile): GgufFile {
  const metadata = new Map<string, GgufMetadataEntry>();
  for (const [key, entry] of vocab.metadata) {
    const v = entry.value;
    const perToken = entry.type === GgufValueType.ARRAY && typeof v === "object" && v !== null && "values" in v && (key === KEY.tokens || key === KEY.tokenType || key === KEY.scores);
    metadata.set(key, perToken ? { type: entry.type, value: { elementType: v.elementType, values: v.values.slice(0, VOCAB_TOKENS) } } : key === KEY.merges ? { type: entry.type, value: { elementType: GgufValueType.STRING, values: [] } } : entry);
  }
  return { ...vocab, metadata };
}

const vocabs = new Map<string, GgufFile>();
function vocabFor(name: string): GgufFile {
  let v = vocabs.get(name);
  if (v === undefined) {
    const file = readGguf(vocabPath(name as ModelShape["vocab"]));
    if (!file.ok) throw new Error(file.error);
    v = cutVocab(file.value);
    vocabs.set(name, v);
  }
  return v;
}

let weightsBackend: WasmBackend;
let kvBackend: WasmBackend;
beforeAll(async () => {
  [weightsBackend, kvBackend] = await Promise.all([createWasmBackend({ threads: 1 }), createWasmBackend({ threads: 1 })]);
});
afterAll(() => { weightsBackend?.dispose?.(); kvBackend?.dispose?.(); });

describe("inspect agrees with the loader", () => {
  for (const shapeName of TINY) {
    test(`${shapeName}, 1 layer, every type`, () => {
      const shape = { ...MODEL_SHAPES[shapeName]!, numLayers: 1 };
      for (const type of TYPES) {
        const bytes = serializeGguf(randomModel({ shapeName, shape, type, seed: 3, vocab: vocabFor(shape.vocab) }));
        const gguf = parseGguf(bytes, `${shapeName} ${type}`);
        if (!gguf.ok) throw new Error(gguf.error);
        const facts = inspectModel(gguf.value, bytes.length);
        if (!facts.ok) throw new Error(facts.error);
        const f = facts.value;
        const model = loadModel(gguf.value);
        if (!model.ok) throw new Error(model.error);
        const c = model.value.config;
        expect([f.architecture, f.num_layers, f.dim, f.num_kv_heads, f.head_dim, f.vocab_size, f.tied_embeddings, f.qkv_bias, f.qk_norm])
          .toEqual([c.architecture, 1, c.dim, c.numKvHeads, c.headDim, VOCAB_TOKENS, c.tiedEmbeddings, c.hasQkvBias, c.hasQkNorm]);
        expect(f.parameters).toBe(gguf.value.tensors.reduce((s, t) => s + t.shape.reduce((a, b) => a * b, 1), 0));
        // every tensor make-model writes is used (rope divisors and dense projections outside the heap), except
        // LongRoPE's factors for the other context length
        expect(f.tensors.filter((t) => t.heap_bytes === null && !t.name.startsWith("rope_factors_")).map((t) => t.name)).toEqual([]);
        expect(Object.values(f.tensor_types).reduce((s, t) => s + t.bytes, 0)).toBe(gguf.value.tensors.reduce((s, t) => s + t.sizeBytes, 0));
        // the weights as the model loads them: the heap grows by exactly the inspected figure
        const before = weightsBackend.liveMemoryBytes;
        new BatchedForward(c, model.value.weights, weightsBackend);
        expect({ type, heap: weightsBackend.liveMemoryBytes - before }).toEqual({ type, heap: f.memory.weights_heap_bytes });
        // one position of the KV cache, as the runner measures it
        kvBackend.allocKvCache({ numLayers: c.numLayers, numBlocks: 1, blockSize: 1, numKvHeads: c.numKvHeads, headDim: c.headDim });
        expect(kvBackend.exportKvBlocks(Int32Array.of(0)).length).toBe(f.memory.kv_bytes_per_token);
        expect(f.memory.kv_bytes_full_context).toBe(f.memory.kv_bytes_per_token * c.contextLength);
        expect(f.memory.weights_memories).toEqual([{ layers: [0, 0], weight_bytes: f.memory.weights_heap_bytes }]);
      }
    }, 60_000);
  }

  test("the weights over wasm32 memories: consecutive layer ranges, every heap byte placed once, none over a memory", () => {
    const shapeName = "tiny-qwen3-0.6b";
    const shape = { ...MODEL_SHAPES[shapeName]!, numLayers: 6 };
    const bytes = serializeGguf(randomModel({ shapeName, shape, type: "q8_0", seed: 3, vocab: vocabFor(shape.vocab) }));
    const gguf = parseGguf(bytes, shapeName);
    if (!gguf.ok) throw new Error(gguf.error);
    const whole = inspectModel(gguf.value, bytes.length);
    if (!whole.ok) throw new Error(whole.error);
    const heap = whole.value.memory.weights_heap_bytes;
    // memories of a third of the weights (plus memory-plan.ts's slack): the layers spread over several
    const memoryBytes = Math.ceil(heap / 3) + MEMORY_SLACK_BYTES;
    const split = inspectModel(gguf.value, bytes.length, memoryBytes);
    if (!split.ok) throw new Error(split.error);
    const memories = split.value.memory.weights_memories!;
    expect(memories.length).toBeGreaterThan(1);
    expect(memories[0]!.layers[0]).toBe(0);
    expect(memories.at(-1)!.layers[1]).toBe(5);
    for (let m = 1; m < memories.length; m++) expect(memories[m]!.layers[0]).toBe(memories[m - 1]!.layers[1] + 1);
    expect(memories.reduce((a, m) => a + m.weight_bytes, 0)).toBe(heap);
    for (const m of memories) expect(m.weight_bytes).toBeLessThanOrEqual(memoryBytes);
    // a memory smaller than one layer: no placement, and the reason
    const none = inspectModel(gguf.value, bytes.length, MEMORY_SLACK_BYTES + 1024);
    if (!none.ok) throw new Error(none.error);
    expect(none.value.memory.weights_memories).toBeNull();
    expect(none.value.memory.weights_memories_error).toContain("does not fit");
  });
});

describe("fennec inspect MODEL (the CLI)", () => {
  test("a make-model file: text and --json agree with the loader", async () => {
    const path = await makeModelFile("smollm2-135m", "q8_0", 1);
    const run = (args: string[]) => Bun.spawnSync([...serverCommand().slice(0, -1), "inspect", ...args], { stdout: "pipe", stderr: "pipe" });
    const json = run([path, "--json"]);
    expect(json.stderr.toString()).toBe("");
    const f = JSON.parse(json.stdout.toString());
    const gguf = readGguf(path);
    if (!gguf.ok) throw new Error(gguf.error);
    const model = loadModel(gguf.value);
    if (!model.ok) throw new Error(model.error);
    const backend = await createWasmBackend({ threads: 1 });
    const before = backend.liveMemoryBytes;
    new BatchedForward(model.value.config, model.value.weights, backend);
    expect(f.memory.weights_heap_bytes).toBe(backend.liveMemoryBytes - before);
    expect(f).toMatchObject({ architecture: "llama", num_layers: 1, dim: 576, num_heads: 9, num_kv_heads: 3, context_length: 8192, tied_embeddings: true, chat_template: false, tokenizer: { model: "gpt2", supported: true } });
    expect(Object.keys(f.tensor_types).sort()).toEqual(["f32", "q8_0"]);
    const text = run([path]).stdout.toString();
    expect(text).toContain("architecture    llama\n");
    expect(text).toContain(`parameters      ${(f.parameters / 1e6).toFixed(1)}M (${f.parameters.toLocaleString("en-US")})`);
    expect(text).toContain("weights in the WASM heap");
    expect(text).toContain(`wasm32 memories for the weights   1: layers 0-0 `);
    // a file that is not a model: one line, exit 2
    const bad = run(["/nonexistent.gguf"]);
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString()).toContain("/nonexistent.gguf: file not found");
  }, 60_000);
});
