/**
 * `fennec inspect MODEL` (Ollama's `ollama show`): a GGUF file's facts and the memory it takes in fennec. The weight
 * figure is what the WASM backend's loadWeight takes from its heap for exactly the tensors the loader picks (repacked
 * quantized blocks or padded f32, 64-byte aligned: wasm-backend.ts weightHeapBytes), the KV figure its f16 cache per
 * token; nothing is loaded to compute them. `--json` prints the same as one object.
 */
import { statSync } from "node:fs";
import { kvCacheBytesPerToken } from "../backend/wasm/kv-cache-layout.ts";
import { planMemories, WASM32_MEMORY_BYTES } from "../backend/wasm/memory-plan.ts";
import { weightHeapBytes } from "../backend/wasm/wasm-weight.ts";
import type { WeightSource } from "../backend/backend.ts";
import type { Options } from "../command-line/flags.ts";
import { inspectConfig } from "../command-line/inspect-config.ts";
import { STEP_DEFAULTS } from "../command-line/engine-config.ts";
import type { GgufFile } from "../gguf/gguf-file.ts";
import { openModelGguf } from "../gguf/model-source.ts";
import { KEY } from "../gguf/names.ts";
import { readModelConfig } from "../model/read-model-config.ts";
import type { ModelConfig } from "../model/model-config.ts";
import { hasSlidingLayers, kvCacheGroups, maxGroupBlocks } from "../model/kv-cache-groups.ts";
import { loadModelWeights } from "../model/weights.ts";
import { ggmlTypeName } from "../tensor/dtypes.ts";
import { createTokenizer } from "../tokenizer/gguf-tokenizer.ts";
import { RuntimeFailure } from "../util/cli-error.ts";
import { errorMessage } from "../util/error-message.ts";
import { err, ok, type Result } from "../util/result.ts";

export interface TensorFacts {
  readonly name: string;
  readonly type: string;
  /** ne0 first, as GGUF stores it */
  readonly shape: readonly number[];
  readonly bytes: number;
  /** heap bytes in fennec (0: used outside the heap); null for a tensor the loader does not use */
  readonly heap_bytes: number | null;
}

export interface ModelFacts {
  readonly source: string;
  readonly file_bytes: number | null;
  readonly name: string;
  readonly architecture: ModelConfig["architecture"];
  readonly parameters: number;
  /**
   * mixture of experts: the parameters one token goes through (every tensor but the stacked experts' (E - k) / E share
   * it is not routed to: the router, its k experts and a shared expert are all read); absent for a dense model
   */
  readonly active_parameters?: number;
  readonly experts?: { readonly count: number; readonly used: number };
  readonly context_length: number;
  readonly vocab_size: number;
  readonly dim: number;
  readonly hidden_dim: number;
  readonly num_layers: number;
  readonly num_heads: number;
  readonly num_kv_heads: number;
  readonly head_dim: number;
  readonly rope_freq_base: number;
  readonly tied_embeddings: boolean;
  readonly qkv_bias: boolean;
  readonly qk_norm: boolean;
  readonly tokenizer: { readonly model: string | null; readonly pre: string | null; readonly supported: boolean; readonly error: string | null };
  readonly chat_template: boolean;
  readonly chat_template_chars: number;
  readonly tensor_types: Readonly<Record<string, { readonly tensors: number; readonly parameters: number; readonly bytes: number }>>;
  readonly tensors: readonly TensorFacts[];
  readonly memory: {
    readonly weights_heap_bytes: number; readonly kv_bytes_per_token: number; readonly kv_bytes_full_context: number;
    /**
     * heap bytes of weights one decode step reads for one token: every matmul weight, one row of the token embedding
     * (all of it when the output matrix is tied to it) and, of the stacked experts, the k routed ones only
     */
    readonly weights_bytes_read_per_token: number;
    /** sliding-window models: what one full-context request holds with vLLM's hybrid KV cache manager (blocks of 16, serve's default step budget) */
    readonly kv_bytes_full_context_hybrid?: number;
    /**
     * the weights over wasm32 memories as serve places them (memory-plan.ts: a range of layers per memory, token_embd
     * with the first, the head with the last), before its KV pool and activations take their share of each; null when
     * they need more memories than fennec runs (the reason in weights_memories_error)
     */
    readonly weights_memories: readonly { readonly layers: readonly [number, number]; readonly weight_bytes: number }[] | null;
    readonly weights_memories_error?: string;
  };
}

const metaString = (gguf: GgufFile, key: string): string | null => {
  const e = gguf.metadata.get(key);
  return e !== undefined && typeof e.value === "string" ? e.value : null;
};

/** Every loaded weight once (a tied output is the embedding). */
function loadedSources(weights: ReturnType<typeof loadModelWeights> & { ok: true }): Set<WeightSource> {
  const w = weights.value;
  const all = new Set<WeightSource>([w.tokenEmbd, w.output, w.outputNorm]);
  for (const layer of w.layers) for (const t of Object.values(layer)) if (t !== null) all.add(t);
  return all;
}

/** The stacked experts' tensors (ffn_{gate,up,down}_exps and their biases): a token reads k of their E expert slices. */
const EXPERT_TENSOR = /\.ffn_[a-z_]+_exps\.(weight|bias)$/;

/** The facts of one parsed GGUF file; an error when fennec cannot load it (the loader's own message). memoryBytes: one
 * wasm32 memory's size (4 GiB; less in tests). */
export function inspectModel(gguf: GgufFile, fileBytes: number | null, memoryBytes = WASM32_MEMORY_BYTES): Result<ModelFacts> {
  const config = readModelConfig(gguf);
  if (!config.ok) return config;
  const c = config.value;
  const weights = loadModelWeights(gguf, c);
  if (!weights.ok) return err(weights.error);
  const heapByName = new Map<string, number>();
  // a fused tensor's row views (phi3's "blk.0.attn_qkv.weight[q]", weights.ts rowSlice) count toward the tensor
  for (const s of loadedSources(weights)) {
    const name = s.name.replace(/\[[a-z]+\]$/, "");
    heapByName.set(name, (heapByName.get(name) ?? 0) + weightHeapBytes(s.type, s.rows, s.cols));
  }
  // used outside the heap: the rope divisors (folded into the angle tables) and gemma-embedding's dense_2 / dense_3
  // (the runner projects each pooled vector in f32)
  const outside = [weights.value.ropeFactors ?? null, weights.value.dense?.dense2 ?? null, weights.value.dense?.dense3 ?? null];
  for (const s of outside) if (s !== null) heapByName.set(s.name, 0);
  const tensors: TensorFacts[] = gguf.tensors.map((t) => ({ name: t.name, type: ggmlTypeName(t.type), shape: t.shape, bytes: t.sizeBytes, heap_bytes: heapByName.get(t.name) ?? null }));
  const types: Record<string, { tensors: number; parameters: number; bytes: number }> = {};
  let parameters = 0;
  let inactive = 0;
  const moe = c.moe;
  // the share of an expert tensor a token does not read
  const unrouted = moe === undefined ? 0 : (moe.expertCount - moe.expertUsedCount) / moe.expertCount;
  for (const t of gguf.tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    parameters += n;
    if (EXPERT_TENSOR.test(t.name)) inactive += n * unrouted;
    const row = (types[ggmlTypeName(t.type)] ??= { tensors: 0, parameters: 0, bytes: 0 });
    row.tensors++;
    row.parameters += n;
    row.bytes += t.sizeBytes;
  }
  let tokenizerError: string | null = null;
  try {
    createTokenizer(gguf);
  } catch (e) {
    tokenizerError = errorMessage(e);
  }
  const template = metaString(gguf, KEY.chatTemplate);
  const kvPerToken = kvCacheBytesPerToken({ numLayers: c.numLayers, numKvHeads: c.numKvHeads, headDim: c.headDim });
  let readPerToken = 0;
  const embd = weights.value.tokenEmbd;
  for (const [name, bytes] of heapByName) {
    if (name === embd.name && weights.value.output !== embd) readPerToken += bytes / embd.rows;
    else readPerToken += EXPERT_TENSOR.test(name) ? bytes * (1 - unrouted) : bytes;
  }
  const sources = [...loadedSources(weights)].filter((t) => (heapByName.get(t.name.replace(/\[[a-z]+\]$/, "")) ?? 0) > 0);
  const plan = planMemories({ tensors: sources.map((t) => ({ name: t.name, type: t.type, rows: t.rows, cols: t.cols })), numLayers: c.numLayers, kvBytesPerLayer: 0, reserveBytes: 0, memoryBytes });
  const memories = plan.ok
    ? plan.value.firstLayer.map((first, m) => ({ layers: [first, (plan.value.firstLayer[m + 1] ?? c.numLayers) - 1] as const, weight_bytes: plan.value.weightBytes[m]! }))
    : null;
  return ok({
    source: gguf.source, file_bytes: fileBytes, name: c.name, architecture: c.architecture, parameters,
    ...(moe === undefined ? {} : { active_parameters: Math.round(parameters - inactive), experts: { count: moe.expertCount, used: moe.expertUsedCount } }),
    context_length: c.contextLength,
    vocab_size: c.vocabSize, dim: c.dim, hidden_dim: c.hiddenDim, num_layers: c.numLayers, num_heads: c.numHeads, num_kv_heads: c.numKvHeads,
    head_dim: c.headDim, rope_freq_base: c.ropeFreqBase, tied_embeddings: c.tiedEmbeddings, qkv_bias: c.hasQkvBias, qk_norm: c.hasQkNorm,
    tokenizer: { model: metaString(gguf, KEY.tokenizerModel), pre: metaString(gguf, KEY.tokenizerPre), supported: tokenizerError === null, error: tokenizerError },
    chat_template: template !== null, chat_template_chars: template?.length ?? 0, tensor_types: types, tensors,
    memory: {
      weights_heap_bytes: [...heapByName.values()].reduce((a, b) => a + b, 0), kv_bytes_per_token: kvPerToken, kv_bytes_full_context: kvPerToken * c.contextLength,
      weights_bytes_read_per_token: Math.round(readPerToken),
      ...(hasSlidingLayers(c) ? { kv_bytes_full_context_hybrid: hybridFullContextBytes(c, kvPerToken / c.numLayers) } : {}),
      weights_memories: memories,
      ...(plan.ok ? {} : { weights_memories_error: plan.error }),
    },
  });
}

/**
 * One full-context request's KV bytes under the hybrid KV cache manager at the default --block-size 16 and serve's
 * default --max-num-batched-tokens: the full groups' every block, each sliding group's window and one step (kv-cache-groups.ts).
 */
function hybridFullContextBytes(c: ModelConfig, bytesPerTokenLayer: number): number {
  const groups = kvCacheGroups(c);
  let blocks = 0;
  for (const g of groups.groups) blocks += maxGroupBlocks(g, c.contextLength, 16, STEP_DEFAULTS["api-server"].maxNumBatchedTokens);
  return blocks * 16 * groups.groupSize * bytesPerTokenLayer;
}

/** 1234567 -> "1.23 MB" (decimal, like file sizes), 6144 -> "6.0 KiB" for small per-token figures */
function bytesText(n: number): string {
  if (n < 10_240) return `${n} bytes`;
  if (n < 1e6) return `${(n / 1024).toFixed(1)} KiB`;
  return n < 1e9 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e9).toFixed(2)} GB`;
}
function countText(n: number): string {
  const short = n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}K` : String(n);
  return `${short} (${n.toLocaleString("en-US")})`;
}

export function factsText(f: ModelFacts): string {
  const row = (k: string, v: string): string => `${k.padEnd(16)}${v}`;
  const lines = [
    row("model", `${f.source}${f.file_bytes === null ? "" : ` (${bytesText(f.file_bytes)})`}`),
    row("name", f.name),
    row("architecture", f.architecture),
    row("parameters", countText(f.parameters)),
    ...(f.active_parameters !== undefined && f.experts !== undefined
      ? [row("active", `${countText(f.active_parameters)} per token (${f.experts.used} of ${f.experts.count} experts routed)`)]
      : []),
    row("context length", `${f.context_length} tokens`),
    row("shape", `dim ${f.dim}, ${f.num_layers} layers, ${f.num_heads} heads (${f.num_kv_heads} KV heads, head size ${f.head_dim}), FFN ${f.hidden_dim}, vocab ${f.vocab_size}, RoPE base ${f.rope_freq_base}`),
    row("", [f.tied_embeddings ? "tied embeddings" : "separate output matrix", ...(f.qkv_bias ? ["QKV bias"] : []), ...(f.qk_norm ? ["QK norm"] : [])].join(", ")),
    row("tokenizer", `${f.tokenizer.model ?? "none"}${f.tokenizer.pre === null ? "" : ` (pre-tokenizer ${f.tokenizer.pre})`}${f.tokenizer.supported ? "" : `: fennec cannot build it (${f.tokenizer.error})`}`),
    row("chat template", f.chat_template ? `yes (${f.chat_template_chars} characters)` : "none (fennec formats chats with its plain fallback)"),
    "tensor types",
  ];
  for (const [type, t] of Object.entries(f.tensor_types).sort((a, b) => b[1].bytes - a[1].bytes)) {
    lines.push(`  ${type.padEnd(8)}${String(t.tensors).padStart(5)} tensors ${countText(t.parameters).padStart(26)} parameters ${bytesText(t.bytes).padStart(10)}`);
  }
  const unused = f.tensors.filter((t) => t.heap_bytes === null);
  if (unused.length > 0) lines.push(`  (${unused.length} tensors fennec does not use: ${unused.slice(0, 4).map((t) => t.name).join(", ")}${unused.length > 4 ? ", ..." : ""})`);
  lines.push(
    "memory in fennec (--device cpu)",
    `  ${"weights in the WASM heap".padEnd(34)}${bytesText(f.memory.weights_heap_bytes)}`,
    `  ${"weights read per decoded token".padEnd(34)}${bytesText(f.memory.weights_bytes_read_per_token)}${f.experts === undefined ? "" : " (the routed experts only)"}`,
    `  ${"KV cache per token (f16 K and V)".padEnd(34)}${bytesText(f.memory.kv_bytes_per_token)}`,
    `  ${`KV cache for ${f.context_length} tokens`.padEnd(34)}${bytesText(f.memory.kv_bytes_full_context)}`,
    ...(f.memory.kv_bytes_full_context_hybrid !== undefined
      ? [`  ${"  hybrid KV cache manager".padEnd(34)}${bytesText(f.memory.kv_bytes_full_context_hybrid)} (its sliding-window layers hold their window only)`]
      : []),
    `  ${"wasm32 memories for the weights".padEnd(34)}${f.memory.weights_memories === null ? `none fits: ${f.memory.weights_memories_error}`
      : `${f.memory.weights_memories.length}: ${f.memory.weights_memories.map((m) => `layers ${m.layers[0]}-${m.layers[1]} ${bytesText(m.weight_bytes)}`).join(", ")}`}`,
  );
  return lines.join("\n");
}

export async function main(options: Options): Promise<number> {
  const config = inspectConfig(options);
  const path = config.model;
  const file = await openModelGguf(path);
  if (!file.ok) throw new RuntimeFailure(file.error);
  let size: number | null = null;
  try {
    size = path === null ? file.value.bytes.length : statSync(path).size;
  } catch { /* the size is only shown */ }
  const facts = inspectModel(file.value, size);
  if (!facts.ok) throw new RuntimeFailure(facts.error);
  process.stdout.write(config.json ? `${JSON.stringify(facts.value)}\n` : `${factsText(facts.value)}\n`);
  return 0;
}
