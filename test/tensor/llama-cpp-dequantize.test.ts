/**
 * Our dequantizers against llama.cpp's own, for every row of the weight-type table. A tiny qwen2 model whose layer
 * only adds a known bias (W_v = 0, v bias = b, W_o = identity, FFN = 0) makes llama.cpp's final hidden state
 * rmsnorm(dequant(token_embd[t]) + b), which node-llama-cpp returns as the embedding of the last token. The bias
 * keeps the scale visible: a wrong block scale changes the direction of x + b, not just its length. (b reaches the
 * residual through llama.cpp's f16 KV cache, hence f16-rounded; everything else is f32.)
 */
import { afterAll, beforeAll, describe, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Llama } from "node-llama-cpp";
import { convertLlama2c } from "../../src/gguf/llama2c.ts";
import { mdF32, mdU32 } from "../../src/gguf/metadata.ts";
import { writeGgufFile, type GgufTensorToWrite } from "../../src/gguf/writer.ts";
import { byteSize, GgmlType, WEIGHT_TYPES, type WeightType } from "../../src/tensor/dtypes.ts";
import { readFileSync } from "node:fs";
import { defaultModelInput } from "../helpers/default-model-files.ts";
import { disposeLlamaCpp, openLlamaCpp } from "../helpers/llama-cpp.ts";

// llama.cpp loads, model files and the first extraction of llama.cpp's vocab files take seconds on a busy 2-core box
setDefaultTimeout(120_000);

const DIM = 256; // one K super-block or eight 32-blocks per row
const dir = mkdtempSync(join(tmpdir(), "fennec-dequant-"));
let llama: Llama;

beforeAll(async () => {
  llama = await openLlamaCpp();
});
afterAll(async () => {
  await disposeLlamaCpp(llama);
  rmSync(dir, { recursive: true, force: true });
});

/** The stories260K tokenizer (512 SentencePiece tokens), from our converter. */
function tokenizerMetadata() {
  const converted = convertLlama2c(readFileSync(defaultModelInput("stories260K.bin")), readFileSync(defaultModelInput("tok512.bin")), "t");
  if (!converted.ok) throw new Error(converted.error);
  return [...converted.value.metadata].filter(([key]) => key.startsWith("tokenizer."));
}

const f32 = (name: string, shape: number[], values: (i: number) => number): GgufTensorToWrite => {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, i) => values(i));
  return { name, shape, type: GgmlType.F32, data: new Uint8Array(data.buffer) };
};
const bias = (i: number) => 0.6 * Math.sin(0.37 * i + 1);

function writeModel(w: WeightType, embd: Uint8Array, vocab: number): string {
  const metadata = new Map(tokenizerMetadata());
  metadata.set("general.architecture", { type: 8, value: "qwen2" });
  for (const [k, v] of Object.entries({ context_length: 64, embedding_length: DIM, block_count: 1, feed_forward_length: DIM,
    "attention.head_count": 4, "attention.head_count_kv": 4, "rope.dimension_count": DIM / 4 })) metadata.set(`qwen2.${k}`, mdU32(v));
  metadata.set("qwen2.attention.layer_norm_rms_epsilon", mdF32(1e-6));
  const zeros = () => 0;
  const tensors: GgufTensorToWrite[] = [
    { name: "token_embd.weight", shape: [DIM, vocab], type: w.type, data: embd },
    f32("blk.0.attn_norm.weight", [DIM], () => 1),
    f32("blk.0.attn_q.weight", [DIM, DIM], zeros), f32("blk.0.attn_q.bias", [DIM], zeros),
    f32("blk.0.attn_k.weight", [DIM, DIM], zeros), f32("blk.0.attn_k.bias", [DIM], zeros),
    f32("blk.0.attn_v.weight", [DIM, DIM], zeros), f32("blk.0.attn_v.bias", [DIM], bias),
    f32("blk.0.attn_output.weight", [DIM, DIM], (i) => (i % DIM === Math.floor(i / DIM) ? 1 : 0)),
    f32("blk.0.ffn_norm.weight", [DIM], () => 1),
    f32("blk.0.ffn_gate.weight", [DIM, DIM], zeros), f32("blk.0.ffn_up.weight", [DIM, DIM], zeros), f32("blk.0.ffn_down.weight", [DIM, DIM], zeros),
    f32("output_norm.weight", [DIM], () => 1),
    f32("output.weight", [DIM, vocab], zeros),
  ];
  const path = join(dir, `dequant-${w.name}.gguf`);
  writeGgufFile(path, { metadata, tensors });
  return path;
}

describe("dequantize matches llama.cpp", () => {
  test.each(WEIGHT_TYPES.map((w) => [w.name, w] as const))("%s", async (_name, w) => {
    const vocab = 512;
    const x = new Float32Array(DIM * vocab); // [vocab][DIM]: a different spread per block
    let s = 12345;
    for (let i = 0; i < x.length; i++) {
      s = (s * 16807) % 2147483647;
      x[i] = (s / 2147483647 - 0.45) * (0.2 + ((i >> 5) % 7));
    }
    const embd = new Uint8Array(byteSize(w, x.length));
    w.quantize(x, embd, x.length);
    const ours = new Float32Array(x.length);
    w.dequantize(embd, ours, x.length);

    const model = await llama.loadModel({ modelPath: writeModel(w, embd, vocab) });
    const context = await model.createEmbeddingContext({ contextSize: 64, threads: 1 });
    try {
      for (const text of ["Once", "upon", "Lily", "time", "The"]) { // single tokens: the embedding is that token's state
        const ids = model.tokenize(text).map(Number);
        const id = ids.at(-1)!;
        const theirs = (await context.getEmbeddingFor(text)).vector; // [DIM]
        // V passes through llama.cpp's f16 KV cache, so the bias arrives rounded to f16
        const h = Array.from(ours.subarray(id * DIM, (id + 1) * DIM), (v, i) => v + Math.f16round(bias(i)));
        const rms = Math.sqrt(h.reduce((a, v) => a + v * v, 0) / DIM + 1e-6);
        let maxDiff = 0;
        for (let i = 0; i < DIM; i++) maxDiff = Math.max(maxDiff, Math.abs(theirs[i]! - h[i]! / rms));
        if (!(maxDiff < 2e-5)) throw new Error(`${w.name}: token ${id} ("${text}") differs from llama.cpp by up to ${maxDiff}`);
      }
    } finally {
      await context.dispose();
      await model.dispose();
    }
  }, 60_000);
});
