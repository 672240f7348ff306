/**
 * The qwen2vl language model: its M-RoPE sections read from rope.dimension_sections (model/read-model-config.ts), the
 * streams each rope pair reads (model/mrope.ts), and the reference forward's positions: with every stream equal (text)
 * it is qwen2's forward on the same weights, in the reference and on the batched runner (WASM kernels); a stream a
 * section reads changes the logits, the unused 4th stream does not, and shifting every stream alike does not (rope is
 * relative); the batched runner given an image's rows as embeddings at M-RoPE positions (ModelBatch.ropePositions) gives
 * the reference's logits, in the prefill and in the decode step after; a step cut into passes cuts each stream. The
 * image-side oracle is
 * test/vision/qwen25vl-oracle.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import type { GgufFile, GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { GgufValueType } from "../../src/gguf/gguf-file.ts";
import { mdArray } from "../../src/gguf/metadata.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { imageMropePositions, mropePairStreams, mropeSlotPositions, textMropePosition, type MropePosition } from "../../src/model/mrope.ts";
import { readModelConfig } from "../../src/model/read-model-config.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import { forwardPasses, type ForwardInputs } from "../../src/model/forward.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { maxAbsDiff } from "../helpers/vectors.ts";
import { makeTinyModel, TINY_SHAPES } from "./tiny-model.ts";

await ensureKernels();

/** sections of the tiny model's 4 rope pairs (headDim 8): t, y, x */
const SECTIONS = [2, 1, 1, 0];

/** The tiny qwen2 model re-labelled qwen2vl (same tensors: q/k/v biases), with `sections` unless null. */
function qwen2vl(sections: readonly number[] | null = SECTIONS, type = GgufValueType.INT32): GgufFile {
  const base = makeTinyModel(TINY_SHAPES.qwen2!, { seed: 3 });
  const metadata = new Map<string, GgufMetadataEntry>();
  for (const [key, value] of base.metadata) metadata.set(key.startsWith("qwen2.") ? `qwen2vl.${key.slice(6)}` : key, value);
  metadata.set("general.architecture", { type: GgufValueType.STRING, value: "qwen2vl" });
  if (sections !== null) metadata.set("qwen2vl.rope.dimension_sections", mdArray(type, [...sections]));
  return { ...base, source: "<tiny qwen2vl>", metadata };
}

function load(file: GgufFile) {
  const model = loadModel(file);
  if (!model.ok) throw new Error(model.error);
  return model.value;
}

describe("M-RoPE streams and positions", () => {
  test("Qwen2.5-VL's sections [16, 24, 24, 0] over 64 pairs: t for 0..15, y for 16..39, x for 40..63", () => {
    const streams = mropePairStreams([16, 24, 24, 0], 128);
    expect(streams.length).toBe(64);
    expect([streams[0], streams[15], streams[16], streams[39], streams[40], streams[63]]).toEqual([0, 0, 1, 1, 2, 2]);
    // sections that cover fewer pairs than there are wrap around (ggml's sector = i % sum)
    expect(Array.from(mropePairStreams([1, 1, 0, 1], 12))).toEqual([0, 1, 3, 0, 1, 3]);
  });

  test("a sequence's slots with two images: each image moves the text after it by max(cols, rows) - cols * rows", () => {
    // text 0, 1; image A (2 x 3) in slots 2..7 at p0 = 2; text slot 8 at 2 + 3 = 5; image B (1 x 1) in slot 9 at p0 = 6;
    // text slot 10 at 7
    const s = mropeSlotPositions([{ offset: 9, cols: 1, rows: 1 }, { offset: 2, cols: 2, rows: 3 }], 0, 11);
    const stream = (k: number) => Array.from(s.subarray(k * 11, (k + 1) * 11));
    expect(stream(0)).toEqual([0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 7]);
    expect(stream(1)).toEqual([0, 1, 2, 2, 3, 3, 4, 4, 5, 6, 7]);
    expect(stream(2)).toEqual([0, 1, 2, 3, 2, 3, 2, 3, 5, 6, 7]);
    expect(stream(3)).toEqual([0, 1, 0, 0, 0, 0, 0, 0, 5, 0, 7]);
    expect(Array.from(mropeSlotPositions([{ offset: 2, cols: 2, rows: 3 }], 8, 9))).toEqual([5, 5, 5, 5]);
  });

  test("an image's rows: t = p0, y = p0 + row, x = p0 + col, e = 0; the next token at p0 + max(rows, cols)", () => {
    const { positions, next } = imageMropePositions(10, 3, 2);
    expect(positions).toEqual([[10, 10, 10, 0], [10, 10, 11, 0], [10, 10, 12, 0], [10, 11, 10, 0], [10, 11, 11, 0], [10, 11, 12, 0]]);
    expect(next).toBe(13);
    expect(imageMropePositions(0, 2, 7).next).toBe(7);
    expect(textMropePosition(4)).toEqual([4, 4, 4, 4]);
  });
});

describe("qwen2vl config", () => {
  test("rope.dimension_sections is read (int32 or uint32, padded to 4)", () => {
    for (const [sections, type] of [[[2, 1, 1, 0], GgufValueType.INT32], [[2, 1, 1], GgufValueType.UINT32]] as const) {
      const config = readModelConfig(qwen2vl(sections, type));
      if (!config.ok) throw new Error(config.error);
      expect(config.value.architecture).toBe("qwen2vl");
      expect(config.value.ropeSections).toEqual([2, 1, 1, 0]);
      expect(config.value.hasQkvBias).toBe(true);
      expect(config.value.ropeNeox).toBe(true);
    }
  });

  test.each([
    ["missing", null, /missing metadata qwen2vl\.rope\.dimension_sections/],
    ["more pairs than the rope has", [2, 2, 1, 0], /qwen2vl\.rope\.dimension_sections \[2, 2, 1, 0\] must sum to 1\.\.4/],
    ["all zero", [0, 0, 0, 0], /must sum to 1\.\.4/],
    ["five entries", [1, 1, 1, 0, 0], /must be at most 4 non-negative integers/],
  ] as const)("sections %s: one error naming the key", (_, sections, message) => {
    const config = readModelConfig(qwen2vl(sections));
    expect(config.ok).toBe(false);
    if (!config.ok) expect(config.error).toMatch(message);
  });
});

describe("qwen2vl forward", () => {
  const tokens = [5, 17, 42, 8, 33, 21];

  test("text positions: the logits of qwen2 on the same weights, in the reference and on the WASM runner", async () => {
    const vl = load(qwen2vl());
    const plain = load(makeTinyModel(TINY_SHAPES.qwen2!, { seed: 3 }));
    const ours = new ReferenceForward(vl.config, vl.weights, tokens.length);
    const theirs = new ReferenceForward(plain.config, plain.weights, tokens.length);
    const expected = tokens.map((t, pos) => theirs.forward(t, pos).slice());
    tokens.forEach((t, pos) => expect(maxAbsDiff(ours.forward(t, pos, textMropePosition(pos)), expected[pos]!)).toBe(0));
    const runner = new Runner(vl.config, vl.weights, await createBackend({ kind: "wasm", threads: 2 }));
    runner.allocateKvCache(4, 4);
    const out = await runner.execute({ sequences: [{ tokenIds: Int32Array.from(tokens), startPos: 0, blockTable: Int32Array.from([0, 1]), logits: "last" }] });
    expect(maxAbsDiff(out.logits.subarray(0, vl.config.vocabSize), expected[tokens.length - 1]!)).toBeLessThan(3e-3);
    runner.dispose();
  });

  test("the streams a section reads change the logits; the unused 4th does not; a common shift does not", () => {
    const { config, weights } = load(qwen2vl());
    /** the last token's logits with the 3rd token at `third` and the others at text positions (+ shift) */
    const run = (third: MropePosition, shift = 0) => {
      const ref = new ReferenceForward(config, weights, tokens.length);
      let logits = new Float32Array(0);
      tokens.forEach((t, slot) => {
        const pos = slot === 2 ? third.map((p) => p + shift) as unknown as MropePosition : textMropePosition(slot + shift);
        logits = ref.forward(t, slot, pos).slice();
      });
      return logits;
    };
    const text = run([2, 2, 2, 2]);
    expect(maxAbsDiff(run([2, 2, 2, 2], 9), text)).toBeLessThan(1e-4);
    expect(maxAbsDiff(run([2, 2, 2, 50]), text)).toBe(0);
    // rope base 1e6 over 4 pairs: the x section (pair 3) turns by 1e6^(-3/4) = 3e-5 rad a position, so move far
    for (const moved of [[20002, 2, 2, 2], [2, 20002, 2, 2], [2, 2, 20002, 2]] as MropePosition[]) {
      expect(maxAbsDiff(run(moved), text)).toBeGreaterThan(1e-3);
    }
  });
});

describe.each(["reference", "wasm"] as const)("qwen2vl runner with M-RoPE positions (%s backend)", (backendName) => {
  test("an image's rows as embeddings at (t, y, x) positions, the text after shifted: the reference's logits, prefill and decode", async () => {
    const { config, weights } = load(qwen2vl());
    const dim = config.dim;
    // 3 text tokens, a 3 x 2 image at p0 = 3 (next text at 3 + max(3, 2) = 6), 2 text tokens, then one decode token
    const image = imageMropePositions(3, 3, 2);
    const embeddings = Float32Array.from({ length: 6 * dim }, (_, i) => Math.sin(i * 0.37) * 0.8);
    const tokens = [5, 17, 42, 0, 0, 0, 0, 0, 0, 8, 33, 21];
    const shift = image.next - 9;
    const ropePos: MropePosition[] = tokens.map((_, slot) => (slot < 3 ? textMropePosition(slot) : slot < 9 ? image.positions[slot - 3]! : textMropePosition(slot + shift)));
    const ref = new ReferenceForward(config, weights, tokens.length);
    const expected = tokens.map((t, slot) => ref.forward(slot >= 3 && slot < 9 ? embeddings.subarray((slot - 3) * dim, (slot - 2) * dim) : t, slot, ropePos[slot]).slice());
    const streams = (from: number, to: number) => {
      const out = new Int32Array(4 * (to - from));
      for (let s = 0; s < 4; s++) for (let t = from; t < to; t++) out[s * (to - from) + t - from] = ropePos[t]![s]!;
      // the engine's helper gives the same streams for any chunk
      expect(Array.from(mropeSlotPositions([{ offset: 3, cols: 3, rows: 2 }], from, to))).toEqual(Array.from(out));
      return out;
    };
    const backend = backendName === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend();
    const runner = new Runner(config, weights, backend);
    runner.allocateKvCache(8, 4);
    const table = Int32Array.from([3, 0, 6, 1]);
    const tolerance = backendName === "wasm" ? 3e-3 : 1e-4;
    const prefill = await runner.execute({ sequences: [{
      tokenIds: Int32Array.from(tokens.slice(0, 11)), startPos: 0, blockTable: table, logits: "all",
      inputEmbeddings: [{ row: 3, numRows: 6, data: embeddings, attendAhead: false }], ropePositions: streams(0, 11),
    }] });
    for (let r = 0; r < 11; r++) expect(maxAbsDiff(prefill.logits.subarray(r * config.vocabSize, (r + 1) * config.vocabSize), expected[r]!)).toBeLessThan(tolerance);
    const decode = await runner.execute({ sequences: [{ tokenIds: Int32Array.from([tokens[11]!]), startPos: 11, blockTable: table, logits: "last", ropePositions: streams(11, 12) }] });
    expect(maxAbsDiff(decode.logits.subarray(0, config.vocabSize), expected[11]!)).toBeLessThan(tolerance);
    // without the streams the image rows sit at sequential positions: other logits
    const plain = new Runner(config, weights, backendName === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend());
    plain.allocateKvCache(8, 4);
    const control = await plain.execute({ sequences: [{
      tokenIds: Int32Array.from(tokens.slice(0, 11)), startPos: 0, blockTable: table, logits: "last",
      inputEmbeddings: [{ row: 3, numRows: 6, data: embeddings, attendAhead: false }],
    }] });
    expect(maxAbsDiff(control.logits.subarray(0, config.vocabSize), expected[10]!)).toBeGreaterThan(10 * tolerance);
    runner.dispose();
    plain.dispose();
  });
});

test("forwardPasses cuts each of the 4 M-RoPE streams with its rows", () => {
  const inputs = {
    tokenIds: Int32Array.from([1, 2, 3, 4, 5]), positions: Int32Array.from([0, 1, 2, 3, 4]), slots: [Int32Array.from([0, 1, 2, 3, 4])],
    sequences: [[{ rowStart: 0, numRows: 5, startPos: 0, blockTable: Int32Array.from([0, 1]) }]],
    kvGroups: { layerGroup: [0], layerSlot: [0], groups: [] } as unknown as ForwardInputs["kvGroups"], logitRows: Int32Array.from([4]),
    // streams t, y, x, e of 5 rows
    ropePositions: Int32Array.from([0, 1, 1, 1, 3, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 30, 31, 32, 33, 34]),
  } satisfies ForwardInputs;
  const passes = forwardPasses(inputs, 2);
  expect(passes.map((p) => Array.from(p.inputs.ropePositions!))).toEqual([
    [0, 1, 10, 11, 20, 21, 30, 31], [1, 1, 12, 13, 22, 23, 32, 33], [3, 14, 24, 34],
  ]);
});
