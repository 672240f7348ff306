/**
 * The llama2.c -> GGUF converter on the default model: the file has the right metadata and tensors, and llama.cpp
 * (node-llama-cpp) loaded on it reproduces the golden greedy ids and tokenizations. This proves the converter; the
 * model's own forward pass is checked against the same golden file elsewhere.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_MODEL_FILES, buildDefaultModel } from "../../src/gguf/default-model-build.ts";
import { GgufValueType, type GgufFile } from "../../src/gguf/gguf-file.ts";
import { convertLlama2c } from "../../src/gguf/llama2c.ts";
import { getArray, getBool, getF32, getString, getU32 } from "../../src/gguf/metadata.ts";
import { readGguf, tensorData } from "../../src/gguf/reader.ts";
import { GgmlType } from "../../src/tensor/dtypes.ts";
import { DEFAULT_MODEL_INPUTS_DIR, defaultModelInput, readGolden } from "../helpers/default-model-files.ts";
import { openLlamaCpp } from "../helpers/llama-cpp.ts";

// llama.cpp loads, model files and the first extraction of llama.cpp's vocab files take seconds on a busy 2-core box
setDefaultTimeout(120_000);

const golden = readGolden();
const dir = mkdtempSync(join(tmpdir(), "fennec-llama2c-"));
const outPath = join(dir, "default-model.gguf");
let file: GgufFile;

beforeAll(async () => {
  await buildDefaultModel(DEFAULT_MODEL_INPUTS_DIR, outPath, join(dir, "cache"));
  const read = readGguf(outPath);
  if (!read.ok) throw new Error(read.error);
  file = read.value;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const unwrap = <T>(r: { ok: true; value: T } | { ok: false; error: string }): T => {
  if (!r.ok) throw new Error(r.error);
  return r.value;
};

describe("stories260K converted to GGUF", () => {
  test("hyperparameters from the llama2.c header and run.c's constants", () => {
    expect(unwrap(getString(file, "general.architecture"))).toBe("llama");
    const u32 = (k: string) => unwrap(getU32(file, `llama.${k}`));
    expect([u32("embedding_length"), u32("feed_forward_length"), u32("block_count"), u32("attention.head_count"),
      u32("attention.head_count_kv"), u32("context_length"), u32("rope.dimension_count")]).toEqual([64, 172, 5, 8, 4, 512, 8]);
    expect(unwrap(getF32(file, "llama.attention.layer_norm_rms_epsilon"))).toBe(Math.fround(1e-5));
    expect(unwrap(getF32(file, "llama.rope.freq_base"))).toBe(10000);
  });

  test("tensors: F32, ggml shapes, tied (no output.weight), freq_cis dropped, data copied in order", () => {
    const names = file.tensors.map((t) => t.name);
    expect(names.length).toBe(1 + 5 * 9 + 1);
    expect(names).not.toContain("output.weight");
    expect(file.tensors.every((t) => t.type === GgmlType.F32)).toBe(true);
    const shape = (n: string) => file.tensors.find((t) => t.name === n)!.shape;
    expect(shape("token_embd.weight")).toEqual([64, 512]);
    expect(shape("blk.4.attn_k.weight")).toEqual([64, 32]);
    expect(shape("blk.0.ffn_gate.weight")).toEqual([64, 172]);
    expect(shape("blk.0.ffn_down.weight")).toEqual([172, 64]);
    // the first embedding floats and the final norm are the checkpoint's own bytes
    const ckpt = readFileSync(defaultModelInput(DEFAULT_MODEL_FILES[0].name));
    const embd = file.tensors.find((t) => t.name === "token_embd.weight")!;
    expect(Buffer.compare(tensorData(file, embd), ckpt.subarray(28, 28 + embd.sizeBytes))).toBe(0);
    // header ints, embedding, then per layer: attn norm, wq, wk, wv, wo, ffn norm, w1, w2, w3
    const floats = 7 + 512 * 64 + 5 * (64 + 64 * 64 + 32 * 64 + 32 * 64 + 64 * 64 + 64 + 3 * 64 * 172);
    const norm = file.tensors.find((t) => t.name === "output_norm.weight")!;
    expect(Buffer.compare(tensorData(file, norm), ckpt.subarray(4 * floats, 4 * floats + 256))).toBe(0);
  });

  test("SentencePiece vocab: U+2581 spaces, special names, token types, scores, BOS/EOS/UNK", () => {
    const tokens = unwrap(getArray(file, "tokenizer.ggml.tokens", GgufValueType.STRING)).values as string[];
    const types = unwrap(getArray(file, "tokenizer.ggml.token_type", GgufValueType.INT32)).values as number[];
    const scores = unwrap(getArray(file, "tokenizer.ggml.scores", GgufValueType.FLOAT32)).values as number[];
    expect(tokens.length).toBe(512);
    expect(tokens.slice(0, 4)).toEqual(["<unk>", "<s>", "</s>", "<0x00>"]);
    expect(tokens[259]).toBe("\u2581t");
    expect(tokens.some((t) => t.includes(" "))).toBe(false);
    expect(types.slice(0, 4)).toEqual([2, 3, 3, 6]);
    expect(types.filter((t) => t === 6).length).toBe(256);
    expect(types[300]).toBe(1);
    expect(scores[260]).toBe(-1);
    expect(unwrap(getString(file, "tokenizer.ggml.model"))).toBe("llama");
    expect([unwrap(getU32(file, "tokenizer.ggml.bos_token_id")), unwrap(getU32(file, "tokenizer.ggml.eos_token_id")),
      unwrap(getU32(file, "tokenizer.ggml.unknown_token_id"))]).toEqual([1, 2, 0]);
    expect(unwrap(getBool(file, "tokenizer.ggml.add_bos_token"))).toBe(true);
  });

  test("an untied checkpoint (negative vocab size) gets output.weight from after the freq_cis tables", () => {
    // dim 8, hidden 16, 1 layer, 2 heads, 1 kv head (kvDim 4), vocab -4 (untied), seqLen 2 (freq_cis 2 x 2 x 2 floats)
    const header = [8, 16, 1, 2, 1, -4, 2];
    const counts = [4 * 8, 8, 8 * 8, 4 * 8, 4 * 8, 8 * 8, 8, 16 * 8, 8 * 16, 16 * 8, 8, 2 * 2, 2 * 2, 4 * 8];
    const floats = counts.flatMap((n, part) => Array.from({ length: n }, (_, i) => part * 1000 + i));
    const ckpt = new Uint8Array(4 * (header.length + floats.length));
    const view = new DataView(ckpt.buffer);
    header.forEach((v, i) => view.setInt32(4 * i, v, true));
    floats.forEach((v, i) => view.setFloat32(4 * (header.length + i), v, true));
    const tok = new Uint8Array(4 + 4 * 9);
    const tv = new DataView(tok.buffer);
    for (let id = 0; id < 4; id++) { tv.setFloat32(4 + 9 * id, -id, true); tv.setInt32(8 + 9 * id, 1, true); tok[12 + 9 * id] = 0x61 + id; }
    const gguf = unwrap(convertLlama2c(ckpt, tok, "untied"));
    const output = gguf.tensors.find((t) => t.name === "output.weight")!;
    expect(output.shape).toEqual([8, 4]);
    expect(Array.from(new Float32Array((output.data as Uint8Array).slice().buffer))).toEqual(Array.from({ length: 32 }, (_, i) => 13 * 1000 + i));
    expect(gguf.tensors.map((t) => t.name)).toEqual(["token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
      "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
      "blk.0.ffn_down.weight", "blk.0.ffn_up.weight", "output_norm.weight", "output.weight"]);
    const ffnDown = gguf.tensors.find((t) => t.name === "blk.0.ffn_down.weight")!;
    expect(ffnDown.shape).toEqual([16, 8]);
    expect(new Float32Array((ffnDown.data as Uint8Array).slice().buffer)[0]).toBe(8 * 1000);
    expect((gguf.metadata.get("tokenizer.ggml.tokens")!.value as { values: string[] }).values).toEqual(["<unk>", "<s>", "</s>", "d"]);
  });

  test("bad inputs give one-line errors", () => {
    const ckpt = readFileSync(defaultModelInput(DEFAULT_MODEL_FILES[0].name));
    const tok = readFileSync(defaultModelInput(DEFAULT_MODEL_FILES[1].name));
    const bad = (c: Uint8Array, t: Uint8Array) => {
      const r = convertLlama2c(c, t, "x", { checkpoint: "m.bin", tokenizer: "t.bin" });
      return r.ok ? "ok" : r.error;
    };
    expect(bad(ckpt.subarray(0, ckpt.length - 4), tok)).toMatch(/^m\.bin: size 1056536 bytes does not match its llama2\.c header/);
    expect(bad(ckpt.subarray(0, 10), tok)).toMatch(/^m\.bin: too short/);
    expect(bad(ckpt, tok.subarray(0, 3000))).toMatch(/^t\.bin: truncated at token/);
    expect(bad(ckpt, new Uint8Array([...tok, 0]))).toMatch(/^t\.bin: 1 bytes left after 512 tokens/);
  });
});

describe("llama.cpp on the converted file", () => {
  test("greedy from BOS reproduces the 255 golden ids, and the 40 tokenizations match", async () => {
    const llama = await openLlamaCpp();
    const model = await llama.loadModel({ modelPath: outPath });
    try {
      const context = await model.createContext({ contextSize: 512, batchSize: 512, threads: 1 });
      const ids: number[] = []; // [255] greedy token ids
      for await (const token of context.getSequence().evaluate([model.tokens.bos!], { temperature: 0 })) {
        if (token === model.tokens.eos || token === model.tokens.bos) break;
        ids.push(Number(token));
        if (ids.length === golden.greedyFromBos.ids.length) break;
      }
      expect(ids).toEqual(golden.greedyFromBos.ids);
      for (const { text, ids: want } of golden.tokenize) expect([text, model.tokenize(text, false).map(Number)]).toEqual([text, want]);
      await context.dispose();
    } finally {
      await model.dispose();
      await llama.dispose();
    }
  });
});
