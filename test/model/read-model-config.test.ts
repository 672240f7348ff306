/** GGUF metadata -> ModelConfig, and the weight finder's shape and type checks: good files load, bad ones give one line. */
import { describe, expect, test } from "bun:test";
import { GgufValueType } from "../../src/gguf/gguf-file.ts";
import { ARCHITECTURES } from "../../src/model/architectures.ts";
import { KEY } from "../../src/gguf/names.ts";
import { readModelConfig } from "../../src/model/read-model-config.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { loadModelWeights } from "../../src/model/weights.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { makeTinyModel, TINY_BIDIRECTIONAL, TINY_GPT_OSS, TINY_MOE_SHAPES, TINY_SHAPES, type TinyModelOptions } from "./tiny-model.ts";

describe("readModelConfig", () => {
  test.each(ARCHITECTURES.map((a) => a.architecture))("%s: reads the shape and the architecture's flags", (arch) => {
    // gemma-embedding only embeds, so its tiny shape is not among the generative TINY_SHAPES
    const shape = arch === "gemma-embedding" ? TINY_BIDIRECTIONAL : (TINY_SHAPES[arch] ?? TINY_MOE_SHAPES[arch] ?? TINY_GPT_OSS);
    const config = readModelConfig(makeTinyModel(shape));
    if (!config.ok) throw new Error(config.error);
    const traits = ARCHITECTURES.find((a) => a.architecture === arch)!;
    expect(config.value).toMatchObject({
      architecture: arch, vocabSize: shape.vocabSize, dim: shape.dim, hiddenDim: shape.hiddenDim,
      numLayers: shape.numLayers, numHeads: shape.numHeads, numKvHeads: shape.numKvHeads, headDim: shape.headDim,
      ropeDim: shape.headDim, tiedEmbeddings: shape.tied, ropeNeox: traits.ropeNeox, hasQkvBias: traits.hasQkvBias,
      hasQkNorm: traits.hasQkNorm, contextLength: shape.contextLength, name: `tiny-${arch}`,
    });
  });

  test("rope scaling: rope.scaling.type / factor (or the old rope.scale_linear) / attn_factor / original_context_length as llama.cpp reads them", () => {
    const f32 = (value: number) => ({ type: GgufValueType.FLOAT32, value });
    const str = (value: string) => ({ type: GgufValueType.STRING, value });
    const read = (metadata: Record<string, { type: GgufValueType; value: number | string }>) => {
      const config = readModelConfig(makeTinyModel(TINY_SHAPES.llama!, { metadata }));
      if (!config.ok) throw new Error(config.error);
      return config.value.ropeScaling!;
    };
    // absent: llama.cpp's default type "linear" with no factor, which does not scale
    expect(read({})).toEqual({ type: "linear", freqScale: 1, attnFactor: 1, originalContextLength: 64 });
    expect(read({ "llama.rope.scaling.type": str("yarn"), "llama.rope.scaling.factor": f32(4), "llama.rope.scaling.original_context_length": { type: GgufValueType.UINT32, value: 16 } }))
      .toEqual({ type: "yarn", freqScale: 0.25, attnFactor: 1, originalContextLength: 16 });
    expect(read({ "llama.rope.scale_linear": f32(2) }).freqScale).toBe(0.5);
    expect(read({ "llama.rope.scaling.type": str("none"), "llama.rope.scaling.factor": f32(8) }).freqScale).toBe(1);
    const bad = readModelConfig(makeTinyModel(TINY_SHAPES.llama!, { metadata: { "llama.rope.scaling.type": str("dynamic") } }));
    expect(bad.ok ? "" : bad.error).toBe(`<tiny llama>: metadata llama.rope.scaling.type "dynamic" is not supported (supported: none, linear, yarn, longrope)`);
  });

  test("optional keys fall back: head_count_kv = head_count, key_length = dim / heads, rope dims = head size", () => {
    const gguf = makeTinyModel(TINY_SHAPES.llama!, {
      metadata: { "llama.attention.head_count_kv": null, "llama.attention.key_length": null, "llama.attention.value_length": null, "llama.rope.freq_base": null },
    });
    const config = readModelConfig(gguf);
    if (!config.ok) throw new Error(config.error);
    expect(config.value).toMatchObject({ numKvHeads: 4, headDim: 8, ropeDim: 8, ropeFreqBase: 10000 });
  });

  const u32 = (value: number) => ({ type: GgufValueType.UINT32, value });
  const bad: [string, Record<string, { type: GgufValueType; value: number | string } | null>, RegExp][] = [
    ["missing architecture", { "general.architecture": null }, /missing metadata general.architecture/],
    ["unsupported architecture", { "general.architecture": { type: GgufValueType.STRING, value: "gpt2" } }, new RegExp(`unsupported architecture "gpt2" \\(supported: ${ARCHITECTURES.map((a) => a.architecture).join(", ")}\\)`)],
    ["missing key", { "llama.block_count": null }, /missing metadata llama.block_count/],
    ["zero", { "llama.embedding_length": u32(0) }, /llama.embedding_length must be a positive integer/],
    ["string for a number", { "llama.block_count": { type: GgufValueType.STRING, value: "two" } }, /llama.block_count is not a number/],
    ["heads not a multiple of kv heads", { "llama.attention.head_count_kv": u32(3) }, /head_count 4 is not a multiple of head_count_kv 3/],
    ["odd rope dims", { "llama.rope.dimension_count": u32(7) }, /rope.dimension_count 7 must be even/],
  ];
  test.each(bad)("%s: one clear line naming the file and key", (_label, metadata, message) => {
    const config = readModelConfig(makeTinyModel(TINY_SHAPES.llama!, { metadata }));
    expect(config.ok).toBe(false);
    if (!config.ok) {
      expect(config.error).toMatch(message);
      expect(config.error).toStartWith("<tiny llama>: ");
      expect(config.error).not.toContain("\n");
    }
  });
});

describe("gemma3 (llama.cpp gemma3.cpp load_arch_hparams)", () => {
  const u32 = (value: number) => ({ type: GgufValueType.UINT32, value });
  const f32 = (value: number) => ({ type: GgufValueType.FLOAT32, value });
  const read = (metadata: TinyModelOptions["metadata"], shape = TINY_SHAPES.gemma3!) => readModelConfig(makeTinyModel(shape, { metadata }));

  test("GeGLU, sqrt(dim) embedding scale, post-norms, sliding layers l % period < period - 1 with base 10000", () => {
    const config = read({});
    if (!config.ok) throw new Error(config.error);
    expect(config.value).toMatchObject({
      ffnActivation: "gelu_tanh", embeddingScale: Math.sqrt(32), hasPostNorms: true, hasQkNorm: true, ropeNeox: true,
      slidingWindow: 5, slidingLayers: [true, false, true], ropeFreqBaseSwa: 10000, ropeFreqBase: 1000000,
    });
    expect(config.value.attentionScale).toBeUndefined(); // 1 / sqrt(headDim)
  });

  test("the default period is 6 (layers 5, 11, ... are global); rope.freq_base_swa is read; no window: every layer global", () => {
    const twelve = { ...TINY_SHAPES.gemma3!, numLayers: 12, slidingWindowPattern: undefined };
    const config = read({ "gemma3.rope.freq_base_swa": f32(5000) }, twelve);
    if (!config.ok) throw new Error(config.error);
    expect(config.value.slidingLayers).toEqual([true, true, true, true, true, false, true, true, true, true, true, false]);
    expect(config.value.ropeFreqBaseSwa).toBe(5000);
    const none = read({ "gemma3.attention.sliding_window": null });
    if (!none.ok) throw new Error(none.error);
    expect(none.value.slidingLayers).toBeUndefined();
  });

  test("62 layers (27B) scale scores by 1 / sqrt(dim / heads) (gemma_pytorch query_pre_attn_scalar)", () => {
    const config = read({ "gemma3.block_count": u32(62) }, { ...TINY_SHAPES.gemma3!, numLayers: 62 });
    if (!config.ok) throw new Error(config.error);
    expect(config.value.attentionScale).toBeCloseTo(1 / Math.sqrt(32 / 4), 12);
  });

  test.each([
    ["logit softcapping", { "gemma3.final_logit_softcapping": f32(30) }, /gemma3.final_logit_softcapping = 30 is not supported/],
    ["a pattern array", { "gemma3.attention.sliding_window_pattern": { type: GgufValueType.ARRAY, value: { type: GgufValueType.BOOL, values: [true, false, true] } } }, /sliding_window_pattern as an array is not supported/],
  ] as const)("refused with one line, never ignored: %s", (_label, metadata, message) => {
    const config = read(metadata as TinyModelOptions["metadata"]);
    expect(config.ok).toBe(false);
    if (!config.ok) expect(config.error).toMatch(message);
  });
});

describe("loadModelWeights", () => {
  test.each(Object.keys(TINY_SHAPES))("%s: finds every tensor; tied output is the embedding", (arch) => {
    const shape = TINY_SHAPES[arch]!;
    const gguf = makeTinyModel(shape);
    const config = readModelConfig(gguf);
    if (!config.ok) throw new Error(config.error);
    const weights = loadModelWeights(gguf, config.value);
    if (!weights.ok) throw new Error(weights.error);
    const w = weights.value;
    expect(w.layers.length).toBe(shape.numLayers);
    expect(w.output === w.tokenEmbd).toBe(shape.tied);
    expect(w.layers[0]!.wk.rows).toBe(shape.numKvHeads * shape.headDim);
    expect(w.layers[0]!.wq.rows).toBe(shape.numHeads * shape.headDim);
    const a = shape.architecture;
    expect(w.layers[1]!.bq !== null).toBe(a === "qwen2" || a === "qwen2vl");
    expect(w.layers[1]!.qNorm !== null).toBe(a === "qwen3" || a === "gemma3");
    expect(w.layers[1]!.attnPostNorm !== null && w.layers[1]!.ffnPostNorm !== null).toBe(a === "gemma3");
    expect(w.layers[1]!.wGate!.rows).toBe(shape.hiddenDim);
    expect(w.layers[1]!.wUp!.rows).toBe(shape.hiddenDim);
    expect(w.ropeFactors != null).toBe(shape.ropeFactors === true);
    expect(w.tokenEmbd.data.length).toBe(shape.vocabSize * shape.dim * 4);
  });

  const load = (edit: Parameters<typeof makeTinyModel>[1]) => {
    const gguf = makeTinyModel(TINY_SHAPES.qwen2!, edit);
    const config = readModelConfig(gguf);
    if (!config.ok) throw new Error(config.error);
    return loadModelWeights(gguf, config.value);
  };

  test("a bias fennec does not run (output, fused qkv, attention output, FFN) is refused by name, not ignored", () => {
    for (const name of ["output.bias", "blk.1.attn_qkv.bias", "blk.0.attn_output.bias", "blk.1.ffn_down.bias", "blk.0.ffn_up.bias"]) {
      const r = load({ editTensors: (ts) => [...ts, { name, shape: [32], type: GgmlType.F32, kind: "bias" }] });
      expect(r.ok ? "" : r.error).toBe(`<tiny qwen2>: tensor ${name} is not supported (fennec runs this architecture without it)`);
    }
  });

  test("phi3: attn_qkv and ffn_up split into row views; LongRoPE's long factors past the original context, short ones within", () => {
    const gguf = makeTinyModel(TINY_SHAPES.phi3!);
    const config = readModelConfig(gguf);
    if (!config.ok) throw new Error(config.error);
    expect(config.value).toMatchObject({ ropeFactors: "longShort", fusedQkv: true, fusedGateUp: true, ropeScaling: { type: "linear", freqScale: 1, originalContextLength: 16 } });
    expect(config.value.ropeScaling!.attnFactor).toBeCloseTo(1.19, 6);
    const long = loadModelWeights(gguf, config.value);
    const short = loadModelWeights(gguf, config.value, { maxModelLen: 16 });
    if (!long.ok || !short.ok) throw new Error("phi3 did not load");
    expect(long.value.ropeFactors!.name).toBe("rope_factors_long.weight");
    expect(short.value.ropeFactors!.name).toBe("rope_factors_short.weight");
    const qkv = gguf.tensors.find((t) => t.name === "blk.0.attn_qkv.weight")!;
    const l0 = long.value.layers[0]!;
    const rowBytes = qkv.sizeBytes / qkv.shape[1]!;
    expect([l0.wq.rows, l0.wk.rows, l0.wv.rows]).toEqual([32, 16, 16]);
    expect(l0.wk.data.byteOffset - l0.wq.data.byteOffset).toBe(32 * rowBytes);
    expect(l0.wv.data.byteOffset - l0.wk.data.byteOffset).toBe(16 * rowBytes);
    expect(l0.wUp!.data.byteOffset - l0.wGate!.data.byteOffset).toBe(48 * rowBytes);
  });

  test("a missing tensor is named", () => {
    const r = load({ editTensors: (ts) => ts.filter((t) => t.name !== "blk.1.attn_k.bias") });
    expect(r.ok ? "" : r.error).toBe("<tiny qwen2>: missing tensor blk.1.attn_k.bias");
  });

  test("a wrong shape is named with both shapes", () => {
    const r = load({ editTensors: (ts) => ts.map((t) => (t.name === "blk.0.ffn_up.weight" ? { ...t, shape: [32, 63] } : t)) });
    expect(r.ok ? "" : r.error).toBe("<tiny qwen2>: tensor blk.0.ffn_up.weight has shape [32, 63], expected [32, 64]");
  });

  test("an unsupported type fails at load naming the tensor and the type", () => {
    const q2k = 10; // ggml Q2_K: not in fennec's table
    const r = load({ editTensors: (ts) => ts.map((t) => (t.name === "blk.0.attn_q.weight" ? { ...t, type: q2k } : t)) });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toStartWith("<tiny qwen2>: tensor blk.0.attn_q.weight has unsupported type");
      expect(r.error).toMatch(/q2_K/i);
    }
  });

  test("a row length that is not a multiple of the block size is named", () => {
    const r = load({ editTensors: (ts) => ts.map((t) => (t.name === "blk.0.ffn_down.weight" ? { ...t, type: GgmlType.Q4_K } : t)) });
    expect(r.ok ? "" : r.error).toBe("<tiny qwen2>: tensor blk.0.ffn_down.weight: row length 64 is not a multiple of the q4_k block size 256");
  });
});

describe("vocabulary, embedding and output head agree (llama.cpp create_tensor's shape checks)", () => {
  const vocabOf = (n: number) => ({
    [KEY.tokens]: { type: GgufValueType.ARRAY, value: { elementType: GgufValueType.STRING, values: Array.from({ length: n }, (_, i) => `t${i}`) } },
  });
  const loadWith = (numTokens: number, edit?: TinyModelOptions["editTensors"]) => {
    const gguf = makeTinyModel(TINY_SHAPES.qwen2!, { metadata: vocabOf(numTokens), ...(edit ? { editTensors: edit } : {}) });
    return loadModel(gguf);
  };

  test("an embedding with more rows than the vocabulary is refused before any weight is touched", () => {
    const r = loadWith(50);
    expect(r.ok ? "" : r.error).toBe("<tiny qwen2>: tensor token_embd.weight has 61 rows but the vocabulary (tokenizer.ggml.tokens) has 50 tokens; they must be equal (llama.cpp refuses this file too)");
  });

  test("an embedding shorter than the vocabulary is refused (it failed later, on ordinary prompts)", () => {
    const r = loadWith(70);
    expect(r.ok ? "" : r.error).toMatch(/token_embd\.weight has 61 rows but the vocabulary .* has 70 tokens/);
  });

  test("an output head whose rows differ from the vocabulary is refused with both shapes", () => {
    const r = loadWith(61, (ts) => ts.map((t) => (t.name === "output.weight" ? { ...t, shape: [32, 40] } : t)));
    expect(r.ok ? "" : r.error).toBe("<tiny qwen2>: tensor output.weight has shape [32, 40], expected [32, 61]");
  });

  test("all three agreeing loads", () => {
    const r = loadWith(61);
    if (!r.ok) throw new Error(r.error);
    expect(r.value.config.vocabSize).toBe(61);
  });
});
