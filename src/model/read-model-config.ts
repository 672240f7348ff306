/**
 * GGUF metadata -> ModelConfig. Every rule gives one error naming the file and the key, never a throw.
 * Key names follow llama.cpp (LLM_KV_*): `<arch>.embedding_length`, `<arch>.attention.head_count` ...
 */
import type { GgufFile, GgufScalar } from "../gguf/gguf-file.ts";
import { archKey, KEY, tensorName } from "../gguf/names.ts";
import { err, ok, type Result } from "../util/result.ts";
import { ARCHITECTURES, architectureTraits, type ArchitectureTraits } from "./architectures.ts";
import type { GgufPoolingType, ModelConfig, MoeConfig } from "./model-config.ts";
import { readRopeScaling } from "./rope-scaling.ts";

/** llama.h enum llama_pooling_type, by value (llama-model.cpp reads LLM_KV_POOLING_TYPE as this number) */
const GGUF_POOLING_TYPES: readonly GgufPoolingType[] = ["none", "mean", "cls", "last", "rank"];

/** The token embedding's ne1 is the vocab size; no output tensor means tied embeddings. */
const TOKEN_EMBD = tensorName("tokenEmbd");
const OUTPUT = tensorName("output");

function scalar(gguf: GgufFile, key: string): GgufScalar | undefined {
  const entry = gguf.metadata.get(key);
  if (entry === undefined || typeof entry.value === "object") return undefined;
  return entry.value;
}

/** A numeric key as a number (GGUF stores counts as u32 or u64 depending on the writer). */
function numberKey(gguf: GgufFile, key: string): Result<number | undefined> {
  const value = scalar(gguf, key);
  if (value === undefined) {
    return gguf.metadata.has(key) ? err(`${gguf.source}: metadata ${key} is not a number`) : ok(undefined);
  }
  if (typeof value === "bigint") return ok(Number(value));
  if (typeof value === "number") return ok(value);
  return err(`${gguf.source}: metadata ${key} is not a number (got ${typeof value})`);
}

/** A required (or defaulted) metadata number > 0: an integer for sizes, any finite number for rope base and eps. */
function positive(kind: "integer" | "number", gguf: GgufFile, key: string, fallback?: number): Result<number> {
  const read = numberKey(gguf, key);
  if (!read.ok) return read;
  const value = read.value ?? fallback;
  if (value === undefined) return err(`${gguf.source}: missing metadata ${key}`);
  const valid = value > 0 && (kind === "integer" ? Number.isInteger(value) : Number.isFinite(value));
  if (!valid) return err(`${gguf.source}: metadata ${key} must be a positive ${kind} (got ${value})`);
  return ok(value);
}

const positiveInt = (gguf: GgufFile, key: string, fallback?: number) => positive("integer", gguf, key, fallback);
const positiveFloat = (gguf: GgufFile, key: string, fallback?: number) => positive("number", gguf, key, fallback);

/**
 * Reads and checks the model's shape from GGUF metadata.
 * @example const config = readModelConfig(gguf); if (!config.ok) throw new CliError(config.error);
 */
export function readModelConfig(gguf: GgufFile): Result<ModelConfig> {
  const archValue = scalar(gguf, KEY.architecture);
  if (typeof archValue !== "string") return err(`${gguf.source}: missing metadata ${KEY.architecture}`);
  const traits = architectureTraits(archValue);
  if (traits === undefined) {
    const supported = ARCHITECTURES.map((a) => a.architecture).join(", ");
    return err(`${gguf.source}: unsupported architecture "${archValue}" (supported: ${supported})`);
  }
  const p = traits.keyPrefix;

  const dim = positiveInt(gguf, archKey(p, "embeddingLength"));
  if (!dim.ok) return dim;
  const hiddenDim = positiveInt(gguf, archKey(p, "feedForwardLength"));
  if (!hiddenDim.ok) return hiddenDim;
  const numLayers = positiveInt(gguf, archKey(p, "blockCount"));
  if (!numLayers.ok) return numLayers;
  const numHeads = positiveInt(gguf, archKey(p, "headCount"));
  if (!numHeads.ok) return numHeads;
  const numKvHeads = positiveInt(gguf, archKey(p, "headCountKv"), numHeads.value);
  if (!numKvHeads.ok) return numKvHeads;
  if (numHeads.value % numKvHeads.value !== 0) {
    return err(`${gguf.source}: attention.head_count ${numHeads.value} is not a multiple of head_count_kv ${numKvHeads.value}`);
  }
  // qwen3 heads are wider than dim / numHeads: it stores key_length
  const headDim = positiveInt(gguf, archKey(p, "keyLength"), dim.value / numHeads.value);
  if (!headDim.ok) return headDim;
  const valueDim = positiveInt(gguf, archKey(p, "valueLength"), headDim.value);
  if (!valueDim.ok) return valueDim;
  if (valueDim.value !== headDim.value) {
    return err(`${gguf.source}: attention.value_length ${valueDim.value} != key_length ${headDim.value} is not supported`);
  }
  const ropeDim = positiveInt(gguf, archKey(p, "ropeDimensionCount"), headDim.value);
  if (!ropeDim.ok) return ropeDim;
  if (ropeDim.value > headDim.value || ropeDim.value % 2 !== 0) {
    return err(`${gguf.source}: rope.dimension_count ${ropeDim.value} must be even and at most the head size ${headDim.value}`);
  }
  const ropeFreqBase = positiveFloat(gguf, archKey(p, "ropeFreqBase"), traits.defaultRopeFreqBase);
  if (!ropeFreqBase.ok) return ropeFreqBase;
  const rmsEps = positiveFloat(gguf, archKey(p, "rmsEps"));
  if (!rmsEps.ok) return rmsEps;
  const contextLength = positiveInt(gguf, archKey(p, "contextLength"));
  if (!contextLength.ok) return contextLength;
  const ropeScaling = readRopeScaling(gguf, p, contextLength.value);
  if (!ropeScaling.ok) return ropeScaling;

  const embd = gguf.tensors.find((t) => t.name === TOKEN_EMBD);
  if (embd === undefined) return err(`${gguf.source}: missing tensor ${TOKEN_EMBD}`);
  const vocabSize = embd.shape[1];
  if (embd.shape.length !== 2 || vocabSize === undefined || vocabSize <= 0) {
    return err(`${gguf.source}: tensor ${TOKEN_EMBD} must be 2-D [dim, vocab] (got [${embd.shape.join(", ")}])`);
  }
  // llama.cpp takes n_vocab from the tokenizer and creates token_embd / output as {n_embd, n_vocab}, refusing any
  // other shape (llama-model.cpp create_tensor): an embedding longer than the vocabulary costs memory for rows no
  // token reaches (2^22 rows: 4.5 GB), a shorter one fails on ordinary prompts, and ids past it have no text
  const tokens = gguf.metadata.get(KEY.tokens)?.value;
  const numTokens = typeof tokens === "object" && tokens !== null && "values" in tokens ? tokens.values.length : null;
  if (numTokens !== null && numTokens !== vocabSize) {
    return err(`${gguf.source}: tensor ${TOKEN_EMBD} has ${vocabSize} rows but the vocabulary (${KEY.tokens}) has ${numTokens} tokens; they must be equal (llama.cpp refuses this file too)`);
  }
  const name = scalar(gguf, KEY.name);
  const gemma = readSlidingWindow(gguf, traits, numLayers.value);
  if (!gemma.ok) return gemma;
  // fennec has no logit softcapping: refuse it rather than ignore it (rope scaling: rope-scaling.ts)
  const softcap = numberKey(gguf, archKey(p, "finalLogitSoftcapping"));
  if (!softcap.ok) return softcap;
  if (softcap.value !== undefined && softcap.value !== 0) {
    return err(`${gguf.source}: ${archKey(p, "finalLogitSoftcapping")} = ${softcap.value} is not supported`);
  }
  const attentionScale = traits.dimPerHeadScaleAtLayers === numLayers.value ? 1 / Math.sqrt(dim.value / numHeads.value) : undefined;
  const pooling = numberKey(gguf, archKey(p, "poolingType"));
  if (!pooling.ok) return pooling;
  const poolingType = pooling.value === undefined ? undefined : GGUF_POOLING_TYPES[pooling.value];
  if (pooling.value !== undefined && poolingType === undefined) {
    return err(`${gguf.source}: metadata ${archKey(p, "poolingType")} must be 0..4 (none, mean, cls, last, rank; got ${pooling.value})`);
  }
  // fennec runs bidirectional attention only for the architectures llama.cpp hard-codes it for (gemma-embedding): any
  // other model that asks for it would be computed wrongly, so it is refused
  if (traits.bidirectional !== true && scalar(gguf, archKey(p, "attentionCausal")) === false) {
    return err(`${gguf.source}: metadata ${archKey(p, "attentionCausal")} is false (bidirectional attention), which fennec does not implement; only causal (decoder) models are supported`);
  }

  const dense = readDenseFeatures(gguf, traits, dim.value);
  if (!dense.ok) return dense;
  const moe = readMoe(gguf, traits, hiddenDim.value);
  if (!moe.ok) return moe;
  const granite = readGraniteScales(gguf, traits);
  if (!granite.ok) return granite;
  const ropeSections = readRopeSections(gguf, traits, ropeDim.value);
  if (!ropeSections.ok) return ropeSections;

  return ok({
    architecture: traits.architecture,
    name: typeof name === "string" && name !== "" ? name : (gguf.source.split("/").pop() ?? gguf.source),
    vocabSize,
    dim: dim.value,
    hiddenDim: hiddenDim.value,
    numLayers: numLayers.value,
    numHeads: numHeads.value,
    numKvHeads: numKvHeads.value,
    headDim: headDim.value,
    ropeDim: ropeDim.value,
    ropeFreqBase: ropeFreqBase.value,
    ropeNeox: traits.ropeNeox,
    ropeScaling: ropeScaling.value,
    // llama.cpp's llama reads rope_factors_long/short instead of rope_freqs when the scaling type is longrope
    ropeFactors: traits.ropeFactors === "freqs" && ropeScaling.value.type === "longrope" ? "longShort" : traits.ropeFactors,
    noRopeLayerStep: traits.noRopeLayerStep,
    fusedGateUp: traits.fusedGateUp,
    fusedQkv: traits.fusedQkv,
    rmsEps: rmsEps.value,
    contextLength: contextLength.value,
    tiedEmbeddings: !gguf.tensors.some((t) => t.name === OUTPUT),
    hasQkvBias: traits.hasQkvBias,
    hasQkNorm: traits.hasQkNorm,
    ...(traits.qkNormFullWidth === true ? { qkNormFullWidth: true } : {}),
    ...(moe.value !== undefined ? { moe: moe.value } : {}),
    ...(traits.ffnActivation !== undefined ? { ffnActivation: traits.ffnActivation } : {}),
    ...(traits.scaleEmbeddings === true ? { embeddingScale: Math.sqrt(dim.value) } : {}),
    ...(traits.hasPostNorms === true ? { hasPostNorms: true } : {}),
    ...gemma.value,
    ...(attentionScale !== undefined ? { attentionScale } : {}),
    ...(poolingType !== undefined ? { poolingType } : {}),
    ...(traits.bidirectional === true ? { bidirectional: true } : {}),
    ...(dense.value !== undefined ? { denseFeatures: dense.value } : {}),
    ...granite.value,
    ...(traits.gptOss === true ? { attentionSinks: true } : {}),
    ...(ropeSections.value !== undefined ? { ropeSections: ropeSections.value } : {}),
  });
}

/**
 * qwen2vl's M-RoPE sections (llama.cpp qwen2vl.cpp load_arch_hparams: get_key_or_arr(rope.dimension_sections, 4,
 * required)): up to 4 non-negative ints (the converter pads Qwen2.5-VL's [16, 24, 24] with a 0), not all zero, whose
 * sum covers at most the ropeDim / 2 pairs (ggml_mrope_cache_init asserts it).
 */
function readRopeSections(gguf: GgufFile, traits: ArchitectureTraits, ropeDim: number): Result<ModelConfig["ropeSections"]> {
  const key = archKey(traits.keyPrefix, "ropeDimensionSections");
  if (traits.mrope !== true) return ok(undefined);
  const value = gguf.metadata.get(key)?.value;
  if (value === undefined) return err(`${gguf.source}: missing metadata ${key} (M-RoPE sections of ${traits.architecture})`);
  const raw = typeof value === "object" && value !== null && "values" in value ? value.values : [value];
  const nums = raw.map((v) => (typeof v === "bigint" ? Number(v) : v));
  if (nums.length > 4 || nums.some((v) => typeof v !== "number" || !Number.isInteger(v) || v < 0)) {
    return err(`${gguf.source}: metadata ${key} must be at most 4 non-negative integers (got ${JSON.stringify(nums.map(String))})`);
  }
  const s = [0, 1, 2, 3].map((i) => (nums[i] as number | undefined) ?? 0) as [number, number, number, number];
  const total = s[0] + s[1] + s[2] + s[3];
  if (total === 0 || total > ropeDim / 2) return err(`${gguf.source}: metadata ${key} [${s.join(", ")}] must sum to 1..${ropeDim / 2} (rope pairs)`);
  return ok(s);
}

/**
 * gemma-embedding's optional sentence-transformers projections (llama.cpp gemma-embedding.cpp load_arch_tensors):
 * dense_2 [dim -> F] and dense_3 [F -> dim], both or neither; F from the tensors, checked against dense_*_feat_* when
 * the file has them (llama.cpp asserts dense_2_feat_in = dense_3_feat_out = dim).
 */
function readDenseFeatures(gguf: GgufFile, traits: ArchitectureTraits, dim: number): Result<number | undefined> {
  const d2 = gguf.tensors.find((t) => t.name === tensorName("dense2"));
  const d3 = gguf.tensors.find((t) => t.name === tensorName("dense3"));
  if (d2 === undefined && d3 === undefined) return ok(undefined);
  if (traits.bidirectional !== true) return err(`${gguf.source}: tensor ${(d2 ?? d3)!.name} is not supported for architecture ${traits.architecture}`);
  if (d2 === undefined || d3 === undefined) return err(`${gguf.source}: has ${(d2 ?? d3)!.name} without ${d2 === undefined ? tensorName("dense2") : tensorName("dense3")}; fennec runs the two projections together`);
  const features = d2.shape[1];
  if (d2.shape.length !== 2 || d2.shape[0] !== dim || features === undefined || d3.shape.length !== 2 || d3.shape[0] !== features || d3.shape[1] !== dim) {
    return err(`${gguf.source}: tensors ${d2.name} [${d2.shape.join(", ")}] and ${d3.name} [${d3.shape.join(", ")}] must be [${dim}, F] and [F, ${dim}]`);
  }
  const p = traits.keyPrefix;
  const expected: [Parameters<typeof archKey>[1], number][] = [["dense2FeatIn", dim], ["dense2FeatOut", features], ["dense3FeatIn", features], ["dense3FeatOut", dim]];
  for (const [key, want] of expected) {
    const value = numberKey(gguf, archKey(p, key));
    if (!value.ok) return value;
    if (value.value !== undefined && value.value !== want) return err(`${gguf.source}: metadata ${archKey(p, key)} = ${value.value} does not match the dense tensors (${want})`);
  }
  return ok(features);
}

/**
 * The experts of a mixture-of-experts architecture (llama.cpp llama_model_base::load_hparams and the arch's
 * load_arch_hparams): expert_count and expert_used_count are required, 0 < k <= experts; the experts' width is
 * expert_feed_forward_length (qwen3moe; default feed_forward_length / k) or feed_forward_length (olmoe). Grouped
 * routing (expert_group_count > 1) and an expert weight scale other than 0 or 1 are refused: fennec does not run them.
 */
function readMoe(gguf: GgufFile, traits: ArchitectureTraits, hiddenDim: number): Result<MoeConfig | undefined> {
  const p = traits.keyPrefix;
  if (traits.moe === undefined) {
    const experts = numberKey(gguf, archKey(p, "expertCount"));
    if (!experts.ok) return experts;
    if (experts.value !== undefined && experts.value > 0) return err(`${gguf.source}: metadata ${archKey(p, "expertCount")} = ${experts.value}: architecture ${traits.architecture} has no experts in fennec`);
    return ok(undefined);
  }
  const expertCount = positiveInt(gguf, archKey(p, "expertCount"));
  if (!expertCount.ok) return expertCount;
  const expertUsedCount = positiveInt(gguf, archKey(p, "expertUsedCount"));
  if (!expertUsedCount.ok) return expertUsedCount;
  if (expertUsedCount.value > expertCount.value) {
    return err(`${gguf.source}: metadata ${archKey(p, "expertUsedCount")} = ${expertUsedCount.value} is more than ${archKey(p, "expertCount")} = ${expertCount.value}`);
  }
  const width = traits.moe.expertWidthKey === "ffn" ? ok(hiddenDim)
    : positiveInt(gguf, archKey(p, "expertFeedForwardLength"), Math.floor(hiddenDim / expertUsedCount.value));
  if (!width.ok) return width;
  const groups = numberKey(gguf, archKey(p, "expertGroupCount"));
  if (!groups.ok) return groups;
  if (groups.value !== undefined && groups.value > 1) return err(`${gguf.source}: metadata ${archKey(p, "expertGroupCount")} = ${groups.value} (grouped expert routing) is not supported`);
  const shared = numberKey(gguf, archKey(p, "expertSharedFeedForwardLength"));
  if (!shared.ok) return shared;
  if (shared.value !== undefined && shared.value > 0 && traits.architecture !== "granitemoe") {
    return err(`${gguf.source}: metadata ${archKey(p, "expertSharedFeedForwardLength")} (a shared expert) is not supported for ${traits.architecture}`);
  }
  return ok({
    expertCount: expertCount.value, expertUsedCount: expertUsedCount.value, expertHiddenDim: width.value, gating: traits.moe.gating, normTopK: traits.moe.normTopK,
    ...(traits.gptOss === true ? { oaiExperts: true } : {}),
    ...(shared.value !== undefined && shared.value > 0 ? { sharedHiddenDim: shared.value } : {}),
  });
}

type GraniteFields = Pick<ModelConfig, "residualScale" | "logitScale" | "embeddingScale" | "attentionScale" | "noRopeLayerStep">;

/**
 * Granite's multipliers (llama.cpp granite.cpp load_arch_hparams): logit_scale is required (the logits are divided by
 * it), residual_scale, embedding_scale and attention.scale optional (0 / absent: none, and 1 / sqrt(headDim)); and
 * rope.scaling.finetuned (default true) = false turns rope off in every layer.
 */
function readGraniteScales(gguf: GgufFile, traits: ArchitectureTraits): Result<GraniteFields> {
  if (traits.graniteScales !== true) return ok({});
  const p = traits.keyPrefix;
  const logit = positiveFloat(gguf, archKey(p, "logitScale"));
  if (!logit.ok) return logit;
  const fields: { -readonly [K in keyof GraniteFields]: GraniteFields[K] } = { logitScale: logit.value };
  for (const [key, field] of [["residualScale", "residualScale"], ["embeddingScale", "embeddingScale"], ["attentionScale", "attentionScale"]] as const) {
    const value = numberKey(gguf, archKey(p, key));
    if (!value.ok) return value;
    if (value.value !== undefined && value.value !== 0) fields[field] = value.value;
  }
  if (scalar(gguf, archKey(p, "ropeScalingFinetuned")) === false) fields.noRopeLayerStep = 1;
  return ok(fields);
}

type SlidingWindowFields = Pick<ModelConfig, "slidingWindow" | "slidingLayers" | "ropeFreqBaseSwa">;

/**
 * The sliding-window layers (llama.cpp gemma3.cpp load_arch_hparams): only when `attention.sliding_window` is set and
 * > 0; layer l slides unless l % period == period - 1, the period being `attention.sliding_window_pattern` (a u32) or
 * the architecture's (gemma3: 6); period 0 makes every layer slide.
 */
function readSlidingWindow(gguf: GgufFile, traits: ArchitectureTraits, numLayers: number): Result<SlidingWindowFields> {
  if (traits.slidingWindowPeriod === undefined) return ok({});
  const p = traits.keyPrefix;
  const window = numberKey(gguf, archKey(p, "slidingWindow"));
  if (!window.ok) return window;
  if (window.value === undefined || window.value === 0) {
    // llama.cpp gemma-embedding.cpp reads the window as a required key
    return traits.bidirectional === true || traits.gptOss === true ? err(`${gguf.source}: missing metadata ${archKey(p, "slidingWindow")} (a positive integer for ${traits.architecture})`) : ok({});
  }
  if (!Number.isInteger(window.value) || window.value < 0) return err(`${gguf.source}: metadata ${archKey(p, "slidingWindow")} must be a positive integer (got ${window.value})`);
  const patternKey = archKey(p, "slidingWindowPattern");
  if (gguf.metadata.has(patternKey) && typeof gguf.metadata.get(patternKey)!.value === "object") {
    return err(`${gguf.source}: metadata ${patternKey} as an array is not supported (a u32 period is)`);
  }
  const period = numberKey(gguf, patternKey);
  if (!period.ok) return period;
  const n = period.value ?? traits.slidingWindowPeriod;
  if (!Number.isInteger(n) || n < 0) return err(`${gguf.source}: metadata ${patternKey} must be a non-negative integer (got ${n})`);
  const slidingLayers = Array.from({ length: numLayers }, (_, l) => n === 0 || l % n < n - 1);
  // gpt-oss: the sliding layers' base defaults to the global one (openai-moe.cpp); gemma3: 10000
  const baseDefault = traits.gptOss === true ? numberKey(gguf, archKey(p, "ropeFreqBase")) : ok(undefined);
  if (!baseDefault.ok) return baseDefault;
  const ropeFreqBaseSwa = positiveFloat(gguf, archKey(p, "ropeFreqBaseSwa"), baseDefault.value ?? traits.defaultRopeFreqBaseSwa ?? 10000);
  if (!ropeFreqBaseSwa.ok) return ropeFreqBaseSwa;
  return ok({ slidingWindow: window.value, slidingLayers, ropeFreqBaseSwa: ropeFreqBaseSwa.value });
}
