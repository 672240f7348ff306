/**
 * Tiny random models with a real llama.cpp vocab, written as GGUF files, for the llama.cpp cross-check: the weights
 * come from tiny-model.ts (seeded), the `tokenizer.*` metadata is copied from llama.cpp's ggml-vocab-*.gguf, and q4_k_m
 * follows make-model's port of llama.cpp's recipe. (make-model's own tiny shapes use larger vocabs; these keep the
 * test within a couple of minutes.)
 */
import { join } from "node:path";
import type { GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { GgmlType, weightTypeByName } from "../../src/tensor/dtypes.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { tensorTypeFor } from "../../scripts/random-model.ts";
import { tensorName } from "../../src/gguf/names.ts";
import { makeTinyModel, type TinyShape } from "./tiny-model.ts";

/** A tensor's type under llama.cpp's q4_k_m recipe (make-model's implementation of llama_tensor_get_type). */
function q4kmType(name: string, cols: number, numLayers: number, tied: boolean): number {
  const layer = layerOf(name);
  const role = name === tensorName("tokenEmbd") ? "tokenEmbd" : name === tensorName("output") ? "output"
    : name === tensorName("attnV", layer) ? "attnV" : name === tensorName("ffnDown", layer) ? "ffnDown" : "other";
  return tensorTypeFor("q4_k_m", role, layer, numLayers, cols, tied);
}

const layerOf = (name: string): number => Number(/^blk\.(\d+)\./.exec(name)?.[1] ?? 0);

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
    // norms and biases stay f32
    tensorType: mixed ? (name, t, tensorShape) => (t === GgmlType.F32 ? t : q4kmType(name, tensorShape[0]!, shape.numLayers, shape.tied)) : undefined,
  });
  const path = join(dir, `${shape.architecture}-${typeName}.gguf`);
  writeGgufFile(path, {
    metadata: gguf.metadata,
    tensors: gguf.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: gguf.bytes.subarray(t.offset, t.offset + t.sizeBytes) })),
  });
  return path;
}
