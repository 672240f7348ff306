/**
 * Reads a LoRA adapter GGUF (llama.cpp's convert_lora_to_gguf.py output) and checks it against the base model before
 * any weight is touched, with one line naming the problem, as llama-adapter.cpp llama_adapter_lora_init_impl does:
 * general.type "adapter", adapter.type "lora", the base's architecture, every tensor `<base>.lora_a` / `.lora_b`
 * (norm vectors skipped, as llama.cpp skips them), both halves of each pair, a base tensor this server adapts, A
 * [nIn, rank] and B [rank, nOut] in ggml order; and vLLM's check of the rank against --max-lora-rank
 * (vllm/lora/models.py: "LoRA rank {rank} is greater than max_lora_rank").
 */
import type { GgufFile } from "../gguf/gguf-file.ts";
import { getF32, getString, optional } from "../gguf/metadata.ts";
import { KEY } from "../gguf/names.ts";
import { readGguf, tensorData } from "../gguf/reader.ts";
import type { ModelConfig } from "../model/model-config.ts";
import { dequantizeTensor } from "../tensor/dtypes.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { LoraAdapter, LoraPair } from "./lora-adapter.ts";
import { baseTensorTarget, LORA_A_SUFFIX, LORA_B_SUFFIX, type LoraTargetName } from "./lora-targets.ts";

/** What an adapter is checked against. */
export interface LoraBase {
  readonly config: ModelConfig;
  /** --max-lora-rank */
  readonly maxLoraRank: number;
}

/** Reads and checks the adapter at `path`. @example const a = readLoraAdapter("a.gguf", { config, maxLoraRank: 16 }); */
export function readLoraAdapter(path: string, base: LoraBase): Result<LoraAdapter> {
  const file = readGguf(path);
  if (!file.ok) return err(`LoRA adapter ${file.error}`);
  return parseLoraAdapter(file.value, base);
}

/** The adapter of an open GGUF (readLoraAdapter without the file). */
export function parseLoraAdapter(file: GgufFile, base: LoraBase): Result<LoraAdapter> {
  const where = file.source;
  const generalType = optional(file, KEY.generalType, getString);
  if (!generalType.ok) return generalType;
  if (generalType.value !== "adapter") return err(`${where}: not a LoRA adapter (general.type is ${JSON.stringify(generalType.value ?? null)}, expected "adapter")`);
  const adapterType = optional(file, KEY.adapterType, getString);
  if (!adapterType.ok) return adapterType;
  if (adapterType.value !== "lora") return err(`${where}: adapter.type is ${JSON.stringify(adapterType.value ?? null)}, expected "lora"`);
  const arch = optional(file, KEY.architecture, getString);
  if (!arch.ok) return arch;
  const c = base.config;
  if (arch.value !== c.architecture) return err(`${where}: the adapter is for architecture ${JSON.stringify(arch.value ?? null)}, the base model is ${c.architecture}`);
  const alpha = optional(file, KEY.adapterLoraAlpha, getF32);
  if (!alpha.ok) return alpha;

  const halves = new Map<string, { a?: (typeof file.tensors)[number]; b?: (typeof file.tensors)[number] }>();
  for (const t of file.tensors) {
    const isA = t.name.endsWith(LORA_A_SUFFIX);
    if (!isA && !t.name.endsWith(LORA_B_SUFFIX)) {
      if (t.name.endsWith("_norm.weight")) continue;
      return err(`${where}: tensor ${t.name} is neither ${LORA_A_SUFFIX} nor ${LORA_B_SUFFIX}`);
    }
    const baseName = t.name.slice(0, -LORA_A_SUFFIX.length);
    const pair = halves.get(baseName) ?? {};
    if (isA) pair.a = t;
    else pair.b = t;
    halves.set(baseName, pair);
  }

  const layers = Array.from({ length: c.numLayers }, () => new Map<LoraTargetName, LoraPair>());
  let rank = 0;
  let bytes = 0;
  for (const [baseName, { a, b }] of halves) {
    if (a === undefined || b === undefined) return err(`${where}: ${baseName} has ${a === undefined ? "no .lora_a" : "no .lora_b"} (a LoRA pair needs both)`);
    const found = baseTensorTarget(baseName);
    if (found === null) return err(`${where}: ${baseName} is not a tensor LoRA can adapt here (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down of a layer)`);
    const { target, layer } = found;
    if (layer >= c.numLayers) return err(`${where}: ${baseName} is past the base model's ${c.numLayers} layers`);
    if (target.ffn && c.moe !== undefined) return err(`${where}: ${baseName}: the base model's layers have experts, not a dense FFN`);
    const [nIn, nOut] = target.dims(c);
    if (a.shape.length !== 2 || b.shape.length !== 2) return err(`${where}: ${baseName}: lora_a and lora_b must be 2-D`);
    const pairRank = b.shape[0]!;
    if (a.shape[0] !== nIn || b.shape[1] !== nOut) {
      return err(`${where}: ${baseName} has lora_a [${a.shape.join(", ")}] and lora_b [${b.shape.join(", ")}], the base tensor needs [${nIn}, rank] and [rank, ${nOut}] (an adapter for another model?)`);
    }
    if (a.shape[1] !== pairRank) return err(`${where}: ${baseName}: lora_a's rank ${a.shape[1]} is not lora_b's ${pairRank} (lora_a must be transposed as convert_lora_to_gguf.py writes it)`);
    if (pairRank > base.maxLoraRank) return err(`${where}: LoRA rank ${pairRank} is greater than max_lora_rank ${base.maxLoraRank} (raise --max-lora-rank)`);
    let av: Float32Array;
    let bv: Float32Array;
    try {
      av = dequantizeTensor({ name: a.name, type: a.type, rows: pairRank, cols: nIn, data: tensorData(file, a) });
      bv = dequantizeTensor({ name: b.name, type: b.type, rows: nOut, cols: pairRank, data: tensorData(file, b) });
    } catch (e) {
      return err(`${where}: ${e instanceof Error ? e.message : String(e)}`);
    }
    layers[layer]!.set(target.name as LoraTargetName, { rank: pairRank, nIn, nOut, a: av, b: bv });
    rank = Math.max(rank, pairRank);
    bytes += (av.length + bv.length) * 4;
  }
  if (rank === 0) return err(`${where}: the adapter has no lora_a / lora_b tensors`);
  return ok({ source: where, architecture: c.architecture, alpha: alpha.value ?? 0, rank, layers, bytes });
}
