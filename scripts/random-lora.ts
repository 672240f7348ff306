/**
 * A LoRA adapter GGUF of seeded random A and B for a base model's shape, laid out as llama.cpp's
 * convert_lora_to_gguf.py writes one: general.type "adapter", adapter.type "lora", adapter.lora.alpha (f32),
 * general.architecture of the base, and per target `<base tensor>.lora_a` (ggml [nIn, rank]: PEFT's lora_A
 * [rank, nIn]) and `<base tensor>.lora_b` ([rank, nOut]: lora_B [nOut, rank]), f32 (the converter's default
 * --outtype) or f16.
 *
 * Values: A ~ N(0, 1/sqrt(nIn)) and B ~ N(0, 0.02), so scale * B(A x) moves each output by a few tenths of the base
 * matmul's own spread at alpha = 2 * rank: enough to change greedy tokens, not so much that the model is all adapter.
 * (A trained adapter's B starts at zero; a zero delta would test nothing.)
 */
import { mdF32, mdString } from "../src/gguf/metadata.ts";
import { KEY, tensorName } from "../src/gguf/names.ts";
import type { GgufTensorToWrite, GgufToWrite } from "../src/gguf/writer.ts";
import { LORA_A_SUFFIX, LORA_B_SUFFIX, LORA_TARGETS, type LoraBaseDims, type LoraTarget } from "../src/lora/lora-targets.ts";
import { GgmlType } from "../src/tensor/dtypes.ts";
import { quantizeF16 } from "../src/tensor/quant-float.ts";
import { fillNormal, tensorRng } from "./random-model.ts";

const B_STD = 0.02;

export interface RandomLoraOptions {
  /** the base's general.architecture */
  readonly architecture: string;
  readonly numLayers: number;
  readonly dims: LoraBaseDims;
  /** a mixture-of-experts base has no dense FFN: its ffn targets are refused */
  readonly moe: boolean;
  readonly rank: number;
  readonly alpha: number;
  /** short names (LORA_TARGETS); default all that the base has */
  readonly targets?: readonly string[];
  readonly seed: number;
  /** default f32 */
  readonly type?: "f32" | "f16";
}

/** The targets named, checked against the table and the base (one line naming the problem). */
export function loraTargets(names: readonly string[] | undefined, moe: boolean): LoraTarget[] {
  if (names === undefined) return LORA_TARGETS.filter((t) => !moe || !t.ffn);
  return names.map((name) => {
    const t = LORA_TARGETS.find((x) => x.name === name);
    if (t === undefined) throw new Error(`unknown LoRA target "${name}" (known: ${LORA_TARGETS.map((x) => x.name).join(", ")})`);
    if (moe && t.ffn) throw new Error(`LoRA target ${name}: a mixture-of-experts base has no dense FFN`);
    return t;
  });
}

function tensorBytes(values: Float32Array, type: "f32" | "f16"): Uint8Array {
  if (type === "f32") return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const half = new Uint8Array(values.length * 2);
  quantizeF16(values, half, values.length);
  return half;
}

/** The adapter, ready for writeGgufFile. */
export function randomLora(o: RandomLoraOptions): GgufToWrite {
  if (!(Number.isInteger(o.rank) && o.rank > 0)) throw new Error(`LoRA rank must be a positive integer (got ${o.rank})`);
  if (!Number.isFinite(o.alpha)) throw new Error(`LoRA alpha must be a number (got ${o.alpha})`);
  const type = o.type ?? "f32";
  const targets = loraTargets(o.targets, o.moe);
  const tensors: GgufTensorToWrite[] = [];
  for (let layer = 0; layer < o.numLayers; layer++) {
    for (const t of targets) {
      const base = tensorName(t.key, layer);
      const [nIn, nOut] = t.dims(o.dims);
      const a = (): Uint8Array => {
        const values = new Float32Array(o.rank * nIn);
        fillNormal(values, tensorRng(o.seed, base + LORA_A_SUFFIX), 1 / Math.sqrt(nIn));
        return tensorBytes(values, type);
      };
      const b = (): Uint8Array => {
        const values = new Float32Array(nOut * o.rank);
        fillNormal(values, tensorRng(o.seed, base + LORA_B_SUFFIX), B_STD);
        return tensorBytes(values, type);
      };
      const ggmlType = type === "f32" ? GgmlType.F32 : GgmlType.F16;
      tensors.push({ name: base + LORA_A_SUFFIX, shape: [nIn, o.rank], type: ggmlType, data: a });
      tensors.push({ name: base + LORA_B_SUFFIX, shape: [o.rank, nOut], type: ggmlType, data: b });
    }
  }
  return {
    metadata: new Map([
      [KEY.architecture, mdString(o.architecture)],
      [KEY.generalType, mdString("adapter")],
      [KEY.name, mdString(`random LoRA (rank ${o.rank}, alpha ${o.alpha}, seed ${o.seed})`)],
      [KEY.adapterType, mdString("lora")],
      [KEY.adapterLoraAlpha, mdF32(o.alpha)],
    ]),
    tensors,
  };
}
