/**
 * The base tensors a LoRA adapter may change: each layer's attention projections and dense FFN, the matrices
 * llama.cpp routes through build_lora_mm (src/llama-graph.cpp). The adapter's tensors are `<base name>.lora_a`
 * [nIn, rank] and `<base name>.lora_b` [rank, nOut] in ggml order (ne0 first), as convert_lora_to_gguf.py writes them.
 * token_embd and output adapters (llm_build_inp_embd's flipped pair, the LM head) are not served here.
 */
import { tensorName, type TensorKey } from "../gguf/names.ts";

/** The widths a target's in / out dims come from (ModelConfig's fields, or make-model's shape). */
export interface LoraBaseDims {
  readonly dim: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly hiddenDim: number;
}

export interface LoraTarget {
  /** the short name make-model's --lora-targets takes (the tensor's middle part in llama.cpp's names) */
  readonly name: string;
  readonly key: TensorKey;
  /** a dense FFN matrix (absent from a mixture-of-experts layer) */
  readonly ffn: boolean;
  /** [nIn, nOut] of the base matrix */
  readonly dims: (d: LoraBaseDims) => readonly [number, number];
}

const q = (d: LoraBaseDims): number => d.numHeads * d.headDim;
const kv = (d: LoraBaseDims): number => d.numKvHeads * d.headDim;

/** In forward order; make-model's default targets are all of them. */
export const LORA_TARGETS: readonly LoraTarget[] = [
  { name: "attn_q", key: "attnQ", ffn: false, dims: (d) => [d.dim, q(d)] },
  { name: "attn_k", key: "attnK", ffn: false, dims: (d) => [d.dim, kv(d)] },
  { name: "attn_v", key: "attnV", ffn: false, dims: (d) => [d.dim, kv(d)] },
  { name: "attn_output", key: "attnOutput", ffn: false, dims: (d) => [q(d), d.dim] },
  { name: "ffn_gate", key: "ffnGate", ffn: true, dims: (d) => [d.dim, d.hiddenDim] },
  { name: "ffn_up", key: "ffnUp", ffn: true, dims: (d) => [d.dim, d.hiddenDim] },
  { name: "ffn_down", key: "ffnDown", ffn: true, dims: (d) => [d.hiddenDim, d.dim] },
];

export type LoraTargetName = "attn_q" | "attn_k" | "attn_v" | "attn_output" | "ffn_gate" | "ffn_up" | "ffn_down";

/** The adapter's tensor suffixes (llama-adapter.cpp pairs them by the base name before them). */
export const LORA_A_SUFFIX = ".lora_a";
export const LORA_B_SUFFIX = ".lora_b";

/**
 * The target and layer of a base tensor name, or null for a tensor no target matches.
 * @example baseTensorTarget("blk.3.attn_q.weight") // { target: LORA_TARGETS[0], layer: 3 }
 */
export function baseTensorTarget(baseName: string): { target: LoraTarget; layer: number } | null {
  const m = /^blk\.(\d+)\./.exec(baseName);
  if (m === null) return null;
  const layer = Number(m[1]);
  const target = LORA_TARGETS.find((t) => tensorName(t.key, layer) === baseName);
  return target === undefined ? null : { target, layer };
}
