/**
 * Finds every tensor of the model by its llama.cpp name and checks its shape and type against the config, so a bad
 * file fails at load with one line naming the tensor, never deep inside a kernel.
 * The result is raw GGUF bytes per tensor (zero-copy views), in the `WeightSource` shape the backends load; for a
 * mapped file each also reads its bytes from the file (readBytes), so a backend can load it without touching the
 * mapping's pages.
 */
import type { WeightSource } from "../backend/backend.ts";
import type { GgufFile } from "../gguf/gguf-file.ts";
import { tensorName, type TensorKey } from "../gguf/names.ts";
import { readTensorBytes, tensorData, tensorFileRange } from "../gguf/reader.ts";
import { byteSize, GgmlType, ggmlTypeName, weightType, WEIGHT_TYPES } from "../tensor/dtypes.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { ModelConfig } from "./model-config.ts";

/** LayerWeights field -> its llama.cpp tensor (gguf/names.ts) */
const LAYER_TENSORS = {
  attnNorm: "attnNorm", wq: "attnQ", wk: "attnK", wv: "attnV", wo: "attnOutput",
  bq: "attnQBias", bk: "attnKBias", bv: "attnVBias", qNorm: "attnQNorm", kNorm: "attnKNorm",
  ffnNorm: "ffnNorm", wGate: "ffnGate", wUp: "ffnUp", wDown: "ffnDown",
  attnPostNorm: "attnPostNorm", ffnPostNorm: "ffnPostNorm",
  ffnGateInp: "ffnGateInp", ffnGateExps: "ffnGateExps", ffnUpExps: "ffnUpExps", ffnDownExps: "ffnDownExps",
  ffnGateShexp: "ffnGateShexp", ffnUpShexp: "ffnUpShexp", ffnDownShexp: "ffnDownShexp",
  attnSinks: "attnSinks", bo: "attnOutputBias", ffnGateInpBias: "ffnGateInpBias",
  ffnGateExpsBias: "ffnGateExpsBias", ffnUpExpsBias: "ffnUpExpsBias", ffnDownExpsBias: "ffnDownExpsBias",
} as const satisfies Record<keyof LayerWeights, TensorKey>;
type LayerTensorKey = keyof typeof LAYER_TENSORS;

export interface LayerWeights {
  /** [dim] */
  readonly attnNorm: WeightSource;
  /** [numHeads * headDim, dim] (rows = output features) */
  readonly wq: WeightSource;
  /** [numKvHeads * headDim, dim] */
  readonly wk: WeightSource;
  /** [numKvHeads * headDim, dim] */
  readonly wv: WeightSource;
  /** [dim, numHeads * headDim] */
  readonly wo: WeightSource;
  /** qwen2: [numHeads * headDim], [numKvHeads * headDim] x2 */
  readonly bq: WeightSource | null;
  readonly bk: WeightSource | null;
  readonly bv: WeightSource | null;
  /** qwen3: [headDim] each, shared by all heads; olmoe (qkNormFullWidth): [numHeads * headDim], [numKvHeads * headDim] */
  readonly qNorm: WeightSource | null;
  readonly kNorm: WeightSource | null;
  /** [dim] */
  readonly ffnNorm: WeightSource;
  /** [hiddenDim, dim]; null in a mixture-of-experts layer */
  readonly wGate: WeightSource | null;
  /** [hiddenDim, dim]; null in a mixture-of-experts layer */
  readonly wUp: WeightSource | null;
  /** [dim, hiddenDim]; null in a mixture-of-experts layer */
  readonly wDown: WeightSource | null;
  /** mixture of experts (ModelConfig.moe): the router [expertCount, dim]; null: a dense FFN */
  readonly ffnGateInp?: WeightSource | null;
  /**
   * the experts' gate and up [expertCount * expertHiddenDim, dim] and down [expertCount * dim, expertHiddenDim]: the
   * 3-D GGUF tensors [cols, rows, experts] seen as 2-D, expert e's rows contiguous (expertRows() cuts one out)
   */
  readonly ffnGateExps?: WeightSource | null;
  readonly ffnUpExps?: WeightSource | null;
  readonly ffnDownExps?: WeightSource | null;
  /** granitemoe (shared): the shared expert's gate, up [sharedHiddenDim, dim] and down [dim, sharedHiddenDim]; null: none */
  readonly ffnGateShexp?: WeightSource | null;
  readonly ffnUpShexp?: WeightSource | null;
  readonly ffnDownShexp?: WeightSource | null;
  /** gpt-oss: the sink logits [numHeads], attn_output's bias [dim], the router's bias [expertCount] */
  readonly attnSinks?: WeightSource | null;
  readonly bo?: WeightSource | null;
  readonly ffnGateInpBias?: WeightSource | null;
  /** gpt-oss: the experts' biases, one row per expert: gate / up [expertCount, expertHiddenDim], down [expertCount, dim] */
  readonly ffnGateExpsBias?: WeightSource | null;
  readonly ffnUpExpsBias?: WeightSource | null;
  readonly ffnDownExpsBias?: WeightSource | null;
  /** gemma3: [dim] each, RMSNorm of the attention / FFN output before its residual add */
  readonly attnPostNorm: WeightSource | null;
  readonly ffnPostNorm: WeightSource | null;
}

export interface ModelWeights {
  /** [vocabSize, dim] */
  readonly tokenEmbd: WeightSource;
  readonly layers: readonly LayerWeights[];
  /** [dim] */
  readonly outputNorm: WeightSource;
  /** [vocabSize, dim]; the same object as tokenEmbd when the embeddings are tied */
  readonly output: WeightSource;
  /**
   * [ropeDim / 2] f32 divisors of the rope frequencies, the same for every layer: rope_freqs (Llama 3.x), or for
   * LongRoPE rope_factors_long when the context is longer than rope.scaling.original_context_length, else
   * rope_factors_short (llama.cpp get_rope_factors); null when the file has none
   */
  readonly ropeFactors?: WeightSource | null;
  /**
   * gemma-embedding's sentence-transformers projections of the pooled vector (ModelConfig.denseFeatures): dense_2
   * [F, dim] then dense_3 [dim, F] (rows = output features); null / absent: none
   */
  readonly dense?: { readonly dense2: WeightSource; readonly dense3: WeightSource } | null;
}

export interface LoadWeightsOptions {
  /** the longest sequence the model will serve (--max-model-len; default the model's context length): picks LongRoPE's factors */
  readonly maxModelLen?: number;
}

/**
 * Expert e of a stacked expert tensor (LayerWeights.ffnGateExps ...): its rows as a WeightSource of their own, a view.
 * @example const gate3 = expertRows(layer.ffnGateExps!, 3, config.moe!.expertCount);
 */
export function expertRows(w: WeightSource, expert: number, expertCount: number): WeightSource {
  const rows = w.rows / expertCount;
  return rowSlice(w, `expert ${expert}`, expert * rows, rows);
}

/** Expected ggml shape, ne0 first: [cols] for 1-D, [cols, rows] for 2-D, [cols, rows, n] for 3-D (seen as [cols, rows * n]). */
type Shape = readonly number[];

/** Thrown inside this file only, turned into a Result at the boundary (`loadModelWeights`). */
class WeightError extends Error {}

/** Finds and checks one tensor and returns its raw bytes as a WeightSource. */
function tensor(gguf: GgufFile, name: string, shape: Shape): WeightSource {
  const info = gguf.tensors.find((t) => t.name === name);
  if (info === undefined) throw new WeightError(`${gguf.source}: missing tensor ${name}`);
  const where = `${gguf.source}: tensor ${name}`;
  const wt = weightType(info.type);
  if (wt === undefined) {
    throw new WeightError(`${where} has unsupported type ${ggmlTypeName(info.type)} (supported: ${WEIGHT_TYPES.map((w) => w.name).join(", ")})`);
  }
  const same = info.shape.length === shape.length && info.shape.every((n, i) => n === shape[i]);
  if (!same) throw new WeightError(`${where} has shape [${info.shape.join(", ")}], expected [${shape.join(", ")}]`);
  const cols = shape[0]!;
  const rows = (shape[1] ?? 1) * (shape[2] ?? 1);
  if (cols % wt.blockSize !== 0) {
    throw new WeightError(`${where}: row length ${cols} is not a multiple of the ${wt.name} block size ${wt.blockSize}`);
  }
  // the reader checked that [offset, offset + sizeBytes) lies in the file
  if (info.sizeBytes !== byteSize(wt, rows * cols)) throw new WeightError(`${where} has ${info.sizeBytes} bytes, ${wt.name} [${rows}, ${cols}] needs ${byteSize(wt, rows * cols)}`);
  const range = tensorFileRange(gguf, info);
  const source = { name, type: info.type, rows, cols, data: tensorData(gguf, info) };
  return range === null ? source : { ...source, readBytes: (at: number, into: Uint8Array) => readTensorBytes(range, at, into) };
}

/**
 * Finds and checks every tensor the config implies (GQA, tied output, qwen2 biases, qwen3 QK-norm, gemma3 post-norms). Other
 * tensors the flags do not ask for are left alone, as llama.cpp does, except biases (which llama.cpp would add): refused.
 * @example const weights = loadModelWeights(gguf, config); if (!weights.ok) throw new CliError(weights.error);
 */
export function loadModelWeights(gguf: GgufFile, config: ModelConfig, options: LoadWeightsOptions = {}): Result<ModelWeights> {
  try {
    return ok(findWeights(gguf, config, options.maxModelLen ?? config.contextLength));
  } catch (e) {
    if (e instanceof WeightError) return err(e.message);
    throw e;
  }
}

/**
 * Rows [start, start + count) of a 2-D weight as a WeightSource of its own: a view, no copy (rows are whole blocks).
 * Fused tensors (phi3's attn_qkv and [gate; up] ffn_up) become the separate matrices every backend already runs.
 */
function rowSlice(w: WeightSource, suffix: string, start: number, count: number): WeightSource {
  const rowBytes = w.data.length / w.rows;
  const slice = { name: `${w.name}[${suffix}]`, type: w.type, rows: count, cols: w.cols, data: w.data.subarray(start * rowBytes, (start + count) * rowBytes) };
  const read = w.readBytes;
  return read === undefined ? slice : { ...slice, readBytes: (at: number, into: Uint8Array) => read(start * rowBytes + at, into) };
}

/** The rope divisors the config asks for (each optional), checked to be f32 [ropeDim / 2]. */
function ropeFactors(gguf: GgufFile, config: ModelConfig, maxModelLen: number): WeightSource | null {
  if (config.ropeFactors === undefined || config.ropeFactors === "none") return null;
  const key: TensorKey = config.ropeFactors === "freqs" ? "ropeFreqs"
    : maxModelLen > (config.ropeScaling?.originalContextLength ?? config.contextLength) ? "ropeFactorsLong" : "ropeFactorsShort";
  const name = tensorName(key);
  if (!gguf.tensors.some((t) => t.name === name)) return null;
  const w = tensor(gguf, name, [config.ropeDim / 2]);
  if (w.type !== GgmlType.F32) throw new WeightError(`${gguf.source}: tensor ${name} has type ${ggmlTypeName(w.type)}, expected f32 (ggml's rope reads f32 factors)`);
  return w;
}

function findWeights(gguf: GgufFile, config: ModelConfig, maxModelLen: number): ModelWeights {
  const { dim, hiddenDim, vocabSize, headDim } = config;
  const qDim = config.numHeads * headDim;
  const kvDim = config.numKvHeads * headDim;
  const tokenEmbd = tensor(gguf, tensorName("tokenEmbd"), [dim, vocabSize]);
  // biases llama.cpp's graphs add whenever the file has them (llama.cpp llama-model.cpp: bo, ffn_*_b, output_b, wqkv_b are
  // TENSOR_NOT_REQUIRED) but fennec's forward has no place for: refused, never ignored; only qwen2's q/k/v biases are run
  const runBiases = config.attentionSinks === true ? /^blk\.\d+\.(attn_[qkv]|attn_output|ffn_gate_inp|ffn_(gate|up|down)_exps)\.bias$/
    : config.hasQkvBias ? /^blk\.\d+\.attn_[qkv]\.bias$/ : null;
  const unrun = gguf.tensors.find((t) => t.name.endsWith(".bias") && !(runBiases?.test(t.name) ?? false));
  if (unrun !== undefined) throw new WeightError(`${gguf.source}: tensor ${unrun.name} is not supported (fennec runs this architecture without it)`);
  const layers: LayerWeights[] = [];
  for (let l = 0; l < config.numLayers; l++) {
    const t = (key: LayerTensorKey, shape: Shape): WeightSource => tensor(gguf, tensorName(LAYER_TENSORS[key], l), shape);
    const bias = (key: LayerTensorKey, n: number): WeightSource | null => (config.hasQkvBias ? t(key, [n]) : null);
    const norm = (key: LayerTensorKey, width: number): WeightSource | null => (config.hasQkNorm ? t(key, [width]) : null);
    const postNorm = (key: LayerTensorKey): WeightSource | null => (config.hasPostNorms === true ? t(key, [dim]) : null);
    // llama.cpp create_tensor_qkv: attn_qkv when the file has it, else attn_q/k/v
    const qkvName = tensorName("attnQkv", l);
    const qkv = config.fusedQkv === true && gguf.tensors.some((x) => x.name === qkvName) ? tensor(gguf, qkvName, [dim, qDim + 2 * kvDim]) : null;
    // phi3: ffn_up is [gate; up]; ggml_swiglu takes silu of the first half (llama-graph build_ffn, LLM_FFN_SWIGLU)
    const gateUp = config.fusedGateUp === true ? tensor(gguf, tensorName("ffnUp", l), [dim, 2 * hiddenDim]) : null;
    // mixture of experts (llama.cpp qwen3moe.cpp, olmoe.cpp load_arch_tensors): router and stacked experts, no dense FFN
    const moe = config.moe;
    const dense = (key: LayerTensorKey, shape: Shape): WeightSource | null => (moe === undefined ? t(key, shape) : null);
    const experts = (key: LayerTensorKey, cols: number, rows: number): WeightSource | null => (moe === undefined ? null : t(key, [cols, rows, moe.expertCount]));
    const eh = moe?.expertHiddenDim ?? 0;
    const sh = moe?.sharedHiddenDim ?? 0;
    const shared = (key: LayerTensorKey, shape: Shape): WeightSource | null => (sh > 0 ? t(key, shape) : null);
    // gpt-oss: sinks and biases; its FFN norm is post_attention_norm (openai-moe.cpp attn_post_norm before the MoE)
    const oss = config.attentionSinks === true;
    // olmoe: the QK-norm weights span all heads
    const normWidth = (n: number): number => (config.qkNormFullWidth === true ? n : headDim);
    layers.push({
      attnNorm: t("attnNorm", [dim]),
      wq: qkv ? rowSlice(qkv, "q", 0, qDim) : t("wq", [dim, qDim]),
      wk: qkv ? rowSlice(qkv, "k", qDim, kvDim) : t("wk", [dim, kvDim]),
      wv: qkv ? rowSlice(qkv, "v", qDim + kvDim, kvDim) : t("wv", [dim, kvDim]),
      wo: t("wo", [qDim, dim]),
      bq: bias("bq", qDim),
      bk: bias("bk", kvDim),
      bv: bias("bv", kvDim),
      qNorm: norm("qNorm", normWidth(qDim)),
      kNorm: norm("kNorm", normWidth(kvDim)),
      ffnNorm: oss ? t("attnPostNorm", [dim]) : t("ffnNorm", [dim]),
      wGate: gateUp ? rowSlice(gateUp, "gate", 0, hiddenDim) : dense("wGate", [dim, hiddenDim]),
      wUp: gateUp ? rowSlice(gateUp, "up", hiddenDim, hiddenDim) : dense("wUp", [dim, hiddenDim]),
      wDown: dense("wDown", [hiddenDim, dim]),
      ffnGateInp: moe === undefined ? null : t("ffnGateInp", [dim, moe.expertCount]),
      ffnGateExps: experts("ffnGateExps", dim, eh),
      ffnUpExps: experts("ffnUpExps", dim, eh),
      ffnDownExps: experts("ffnDownExps", eh, dim),
      ffnGateShexp: shared("ffnGateShexp", [dim, sh]),
      ffnUpShexp: shared("ffnUpShexp", [dim, sh]),
      ffnDownShexp: shared("ffnDownShexp", [sh, dim]),
      ...(oss ? {
        attnSinks: t("attnSinks", [config.numHeads]), bo: t("bo", [dim]), ffnGateInpBias: t("ffnGateInpBias", [moe!.expertCount]),
        ffnGateExpsBias: t("ffnGateExpsBias", [eh, moe!.expertCount]), ffnUpExpsBias: t("ffnUpExpsBias", [eh, moe!.expertCount]),
        ffnDownExpsBias: t("ffnDownExpsBias", [dim, moe!.expertCount]),
      } : {}),
      attnPostNorm: oss ? null : postNorm("attnPostNorm"),
      ffnPostNorm: postNorm("ffnPostNorm"),
    });
  }
  return {
    tokenEmbd,
    layers,
    outputNorm: tensor(gguf, tensorName("outputNorm"), [dim]),
    output: config.tiedEmbeddings ? tokenEmbd : tensor(gguf, tensorName("output"), [dim, vocabSize]),
    ropeFactors: ropeFactors(gguf, config, maxModelLen),
    dense: config.denseFeatures === undefined ? null
      : { dense2: tensor(gguf, tensorName("dense2"), [dim, config.denseFeatures]), dense3: tensor(gguf, tensorName("dense3"), [config.denseFeatures, dim]) },
  };
}
