/**
 * Tiny random models with a real llama.cpp vocab, written as GGUF files, for the llama.cpp cross-check: the weights
 * come from tiny-model.ts (seeded), the `tokenizer.*` metadata is copied from llama.cpp's ggml-vocab-*.gguf.
 */
import { join } from "node:path";
import type { GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { GgmlType, weightTypeByName } from "../../src/tensor/dtypes.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { makeTinyModel, type TinyShape } from "./tiny-model.ts";

/** "q4_k_m": llama.cpp's mixed recipe on a 2-layer model: Q4_K everywhere, Q6_K for output and for attn_v / ffn_down of layer 0 (use_more_bits). */
function q4kmType(name: string): number {
  if (name === "output.weight") return GgmlType.Q6_K;
  if (name === "blk.0.attn_v.weight" || name === "blk.0.ffn_down.weight") return GgmlType.Q6_K;
  return GgmlType.Q4_K;
}

/** Writes `<dir>/<arch>-<type>.gguf` and returns its path. */
export function writeVocabModel(dir: string, shape: TinyShape, vocabName: string, typeName: string, seed: number): string {
  const vocab = readGguf(llamaVocabPath(vocabName));
  if (!vocab.ok) throw new Error(vocab.error);
  const metadata: Record<string, GgufMetadataEntry> = {};
  for (const [key, entry] of vocab.value.metadata) if (key.startsWith("tokenizer.")) metadata[key] = entry;
  const mixed = typeName === "q4_k_m";
  const wt = mixed ? undefined : weightTypeByName(typeName);
  if (!mixed && wt === undefined) throw new Error(`unknown type ${typeName}`);
  const gguf = makeTinyModel(shape, {
    seed,
    matrixType: wt?.type ?? GgmlType.Q4_K,
    metadata,
    tensorType: mixed ? (name, t) => (t === GgmlType.F32 ? t : q4kmType(name)) : undefined, // norms and biases stay f32
  });
  const path = join(dir, `${shape.architecture}-${typeName}.gguf`);
  writeGgufFile(path, {
    metadata: gguf.metadata,
    tensors: gguf.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: gguf.bytes.subarray(t.offset, t.offset + t.sizeBytes) })),
  });
  return path;
}
