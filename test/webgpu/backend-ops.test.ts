/**
 * What only the WebGPU backend has, against the reference backend, on the adapter present (lavapipe in CI: see
 * scripts/install-vulkan.sh): a shader per weight type (matched tighter than the shared suite's 3e-2, since the GPU
 * does not quantize activations), the F16 conversion, the 16-lane matmul, 2-D grids, row-split weights, odd f16 rows,
 * attention to 1e-5 (the shared suite allows 4e-3 x rms for the WASM builds), warmUp, the KV host mirror, topK.
 * Every op's general case runs on WebGPU in test/conformance/backend.test.ts (test/webgpu/conformance-entry.ts).
 * Tolerances: f32 math in a different order than the reference (which accumulates attention in f64), so each output
 * must agree to 1e-4 of the largest magnitude in its buffer (1e-5 relative for the ops without reductions).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { AttentionSequence, Backend, DeviceBuffer, Weight, WeightSource } from "../../src/backend/backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { createWebGpuBackend, WebGpuBackend } from "../../src/backend/webgpu/webgpu-backend.ts";
import { rng as sharedRng } from "../helpers/prng.ts";
import { GgmlType, WEIGHT_TYPES, byteSize, type WeightType } from "../../src/tensor/dtypes.ts";

// a cold Mesa shader cache compiles each pipeline with LLVM: seconds on a busy 2-core machine
setDefaultTimeout(60_000);
let gpu: WebGpuBackend;
const ref = new ReferenceBackend();
const notices: string[] = [];
beforeAll(async () => { gpu = await createWebGpuBackend({ timeoutMs: 20_000, log: (l) => notices.push(l) }); });
afterAll(() => gpu?.dispose());

/** the shared mulberry32, spread over [-1, 1) */
function rng(seed: number): () => number {
  const random = sharedRng(seed);
  return () => random() * 2 - 1;
}
const randn = (n: number, seed: number, scale = 1) => { const r = rng(seed); return Float32Array.from({ length: n }, () => r() * scale); };

function weightSource(wt: WeightType, rows: number, cols: number, seed: number, name = `w.${wt.name}`): WeightSource {
  const values = randn(rows * cols, seed);
  const data = new Uint8Array(byteSize(wt, rows * cols));
  wt.quantize(values, data, rows * cols);
  return { name, type: wt.type, rows, cols, data };
}

/** the same op on both backends; returns [gpu, reference] contents of `outName` */
interface Pair { g: DeviceBuffer; r: DeviceBuffer }
function pair(values: Float32Array): Pair {
  const g = gpu.alloc(values.length); gpu.write(g, values);
  const r = ref.alloc(values.length); ref.write(r, values);
  return { g, r };
}
async function both(p: Pair, n: number): Promise<[Float32Array, Float32Array]> {
  return [await gpu.read(p.g, n), await ref.read(p.r, n)];
}

function expectClose(got: Float32Array, want: Float32Array, relTol: number): void {
  expect(got.length).toBe(want.length);
  let scale = 1e-6;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  let worst = 0;
  let at = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i]! - want[i]!);
    if (!(d <= worst)) { worst = d; at = i; }
  }
  if (!(worst <= relTol * scale)) throw new Error(`max |diff| ${worst} at ${at} (got ${got[at]}, want ${want[at]}) > ${relTol} x ${scale}`);
}

const F16 = WEIGHT_TYPES.find((w) => w.type === GgmlType.F16)!;
function asF16(s: WeightSource): WeightSource {
  const values = new Float32Array(s.rows * s.cols);
  WEIGHT_TYPES.find((w) => w.type === s.type)!.dequantize(s.data, values, values.length);
  const data = new Uint8Array(values.length * 2);
  F16.quantize(values, data, values.length);
  return { ...s, type: GgmlType.F16, data };
}

const loadBoth = (s: WeightSource): [Weight, Weight] => [gpu.loadWeight(s), ref.loadWeight(s)];

const ROWS = 37;
const COLS = 512; // a multiple of every block size (256 for the K-quants)

/** matmul of 1 and 3 rows and an embed, on `backend` with wg and on the reference with wr */
async function expectSameMatmulAndEmbed(backend: WebGpuBackend, wg: Weight, wr: Weight): Promise<void> {
  for (const numRows of [1, 3]) {
    const xs = randn(numRows * COLS, 100 + numRows);
    const x = backend.alloc(xs.length); backend.write(x, xs);
    const xr = ref.alloc(xs.length); ref.write(xr, xs);
    const out = backend.alloc(numRows * ROWS);
    const outR = ref.alloc(numRows * ROWS);
    backend.matmul(out, wg, x, numRows);
    ref.matmul(outR, wr, xr, numRows);
    expectClose(await backend.read(out, numRows * ROWS), await ref.read(outR, numRows * ROWS), 1e-5);
  }
  const ids = Int32Array.from([0, 36, 5, 5, 17]);
  const emb = backend.alloc(ids.length * COLS);
  const embR = ref.alloc(ids.length * COLS);
  backend.embed(emb, wg, ids);
  ref.embed(embR, wr, ids);
  expectClose(await backend.read(emb, ids.length * COLS), await ref.read(embR, ids.length * COLS), 1e-6);
}

describe("matmul and embed over every weight type", () => {
  test.each(WEIGHT_TYPES.map((wt) => [wt.name, wt] as const))("%s", async (_name, wt) => {
    const source = weightSource(wt, ROWS, COLS, 7 + wt.type);
    const [wg, wr] = loadBoth(source);
    await expectSameMatmulAndEmbed(gpu, wg, wr);
  });

  test("every type of the dtypes table has a shader: nothing is converted", () => {
    expect(notices).toEqual([]);
  });

  test("a type left without a shader is converted to f16 (one notice per type) and matches the f16-rounded oracle", async () => {
    const lines: string[] = [];
    const f16Only = await createWebGpuBackend({ log: (l) => lines.push(l), nativeTypes: [GgmlType.F32, GgmlType.F16] });
    try {
      for (const wt of WEIGHT_TYPES.filter((w) => w.type === GgmlType.Q5_K || w.type === GgmlType.Q8_0)) {
        for (const seed of [1, 2]) {
          const source = weightSource(wt, ROWS, COLS, seed);
          await expectSameMatmulAndEmbed(f16Only, f16Only.loadWeight(source), ref.loadWeight(asF16(source)));
        }
      }
      expect(lines).toEqual([
        "fennec: webgpu has no q8_0 shader; converting q8_0 weights to f16 at load",
        "fennec: webgpu has no q5_k shader; converting q5_k weights to f16 at load",
      ]);
    } finally {
      f16Only.dispose();
    }
  });

  test("the GPU matmul variant (16 lanes per output row) matches too, and is batch invariant", async () => {
    const gpuStyle = await createWebGpuBackend({ log: () => {}, matmulLanes: 16 });
    try {
      expect(gpuStyle.matmulLanes).toBe(16);
      for (const wt of WEIGHT_TYPES.filter((w) => [GgmlType.F16, GgmlType.Q8_0, GgmlType.Q4_K].includes(w.type))) {
        const source = weightSource(wt, ROWS, COLS, 31);
        const w = gpuStyle.loadWeight(source);
        await expectSameMatmulAndEmbed(gpuStyle, w, ref.loadWeight(source));
        const xs = randn(9 * COLS, 32);
        const x9 = gpuStyle.alloc(9 * COLS); gpuStyle.write(x9, xs);
        const x1 = gpuStyle.alloc(COLS); gpuStyle.write(x1, xs.subarray(8 * COLS));
        const o9 = gpuStyle.alloc(9 * ROWS); const o1 = gpuStyle.alloc(ROWS);
        gpuStyle.matmul(o9, w, x9, 9);
        gpuStyle.matmul(o1, w, x1, 1);
        expect(Array.from(await gpuStyle.read(o9, ROWS, 8 * ROWS))).toEqual(Array.from(await gpuStyle.read(o1, ROWS)));
      }
    } finally {
      gpuStyle.dispose();
    }
  });

  test("a matmul over 65535 workgroups folds into 2-D (16 lanes, 53000 input rows)", async () => {
    const gpuStyle = await createWebGpuBackend({ log: () => {}, matmulLanes: 16 });
    try {
      const f32 = WEIGHT_TYPES.find((w) => w.type === GgmlType.F32)!;
      const source = weightSource(f32, ROWS, 32, 41);
      const numRows = 53_000; // ceil(37 / 4) x ceil(53000 / 8) = 66250 groups
      const xs = randn(numRows * 32, 42);
      const x = gpuStyle.alloc(xs.length); gpuStyle.write(x, xs);
      const out = gpuStyle.alloc(numRows * ROWS);
      gpuStyle.matmul(out, gpuStyle.loadWeight(source), x, numRows);
      const xr = ref.alloc(xs.length); ref.write(xr, xs);
      const outR = ref.alloc(numRows * ROWS);
      ref.matmul(outR, ref.loadWeight(source), xr, numRows);
      expectClose(await gpuStyle.read(out, numRows * ROWS), await ref.read(outR, numRows * ROWS), 1e-5);
    } finally {
      gpuStyle.dispose();
    }
  });

  test("weights over the binding limit are split by rows: same matmul and embed", async () => {
    const chunked = await createWebGpuBackend({ log: () => {}, maxWeightChunkBytes: 1024 });
    try {
      for (const wt of WEIGHT_TYPES.filter((w) => w.type === GgmlType.Q6_K || w.type === GgmlType.F16)) {
        const source = weightSource(wt, ROWS, COLS, 21);
        // 1024-byte chunks hold 2 rows of 512 f16 values or 2 rows of Q6_K (424 bytes each)
        await expectSameMatmulAndEmbed(chunked, chunked.loadWeight(source), ref.loadWeight(source));
      }
    } finally {
      chunked.dispose();
    }
  });

  test("odd-length f16 rows and 1-D tensors are kept exact as f32", async () => {
    const [wg, wr] = loadBoth(weightSource(F16, 5, 43, 11));
    const x = pair(randn(2 * 43, 12));
    const out = pair(new Float32Array(10));
    gpu.matmul(out.g, wg, x.g, 2); ref.matmul(out.r, wr, x.r, 2);
    const [got, want] = await both(out, 10);
    expectClose(got, want, 1e-6);
  });
});

describe("elementwise grids past the 65535-workgroup limit", () => {
  const f32 = WEIGHT_TYPES.find((w) => w.type === GgmlType.F32)!;

  test("grids over 65535 workgroups fold into 2-D (add over 4.5M floats, rmsNorm over 70000 rows)", async () => {
    const n = 4_500_000; // > 65535 groups x 64 threads
    const a = Float32Array.from({ length: n }, (_, i) => i % 1000);
    const b = Float32Array.from({ length: n }, (_, i) => (i % 7) * 0.5);
    const ga = gpu.alloc(n); gpu.write(ga, a);
    const gb = gpu.alloc(n); gpu.write(gb, b);
    gpu.add(ga, ga, gb, n);
    const sum = await gpu.read(ga, n);
    for (const i of [0, 1, 65535 * 64 - 1, 65535 * 64, n - 1]) expect(sum[i]).toBe(a[i]! + b[i]!);
    const rows = 70_000; // > 65535 one-workgroup-per-row groups
    const [wg, wr] = loadBoth(weightSource(f32, 1, 8, 77));
    const x = pair(randn(rows * 8, 78));
    gpu.rmsNorm(x.g, x.g, wg, rows, 8, 1e-5); ref.rmsNorm(x.r, x.r, wr, rows, 8, 1e-5);
    const [got, want] = await both(x, rows * 8);
    expectClose(got, want, 1e-5);
    for (const buf of [ga, gb, x.g]) gpu.free(buf);
  });
});

describe("paged KV cache and attention", () => {
  const shape = { numLayers: 2, numBlocks: 12, blockSize: 4, numKvHeads: 2, headDim: 16 };
  const numHeads = 6; // GQA: 3 query heads per KV head
  const kvDim = shape.numKvHeads * shape.headDim;
  const qDim = numHeads * shape.headDim;
  // two sequences with scattered blocks: A has 9 cached tokens then a 3-token chunk; B decodes its 6th token
  const tableA = Int32Array.from([7, 2, 9]);
  const tableB = Int32Array.from([0, 11]);
  const slotsOf = (table: Int32Array, from: number, n: number) =>
    Int32Array.from({ length: n }, (_, i) => table[Math.floor((from + i) / 4)]! * 4 + ((from + i) % 4));

  async function fill(b: Backend, layer: number, table: Int32Array, n: number, seed: number): Promise<void> {
    const k = b.alloc(n * kvDim); b.write(k, randn(n * kvDim, seed));
    const v = b.alloc(n * kvDim); b.write(v, randn(n * kvDim, seed + 1));
    b.kvStore(layer, k, v, slotsOf(table, 0, n));
  }

  test("kvStore then attention over two ragged sequences, both layers", async () => {
    for (const b of [gpu, ref] as Backend[]) {
      b.allocKvCache(shape);
      for (const layer of [0, 1]) { await fill(b, layer, tableA, 12, 20 + layer); await fill(b, layer, tableB, 6, 40 + layer); }
    }
    const seqs: AttentionSequence[] = [
      { rowStart: 0, numRows: 3, startPos: 9, blockTable: tableA },
      { rowStart: 3, numRows: 1, startPos: 5, blockTable: tableB },
    ];
    for (const layer of [0, 1]) {
      const q = pair(randn(4 * qDim, 60 + layer, 2));
      const out = pair(new Float32Array(4 * qDim));
      gpu.attention(out.g, q.g, layer, numHeads, seqs);
      ref.attention(out.r, q.r, layer, numHeads, seqs);
      const [got, want] = await both(out, 4 * qDim);
      expectClose(got, want, 1e-5);
    }
  });

  test("a long context (300 keys, several score chunks) matches", async () => {
    const long = { ...shape, numLayers: 1, numBlocks: 80, blockSize: 4 };
    const table = Int32Array.from({ length: 76 }, (_, i) => 79 - i);
    for (const b of [gpu, ref] as Backend[]) { b.allocKvCache(long); await fill(b, 0, table, 301, 70); }
    const seqs = [{ rowStart: 0, numRows: 2, startPos: 299, blockTable: table }];
    const q = pair(randn(2 * qDim, 80, 3));
    const out = pair(new Float32Array(2 * qDim));
    gpu.attention(out.g, q.g, 0, numHeads, seqs);
    ref.attention(out.r, q.r, 0, numHeads, seqs);
    const [got, want] = await both(out, 2 * qDim);
    expectClose(got, want, 1e-5);
  });

  test("warmUp compiles everything without touching the KV cache", async () => {
    gpu.allocKvCache(shape);
    await fill(gpu, 1, tableB, 6, 95);
    await gpu.read(gpu.alloc(1), 1);
    const before = gpu.exportKvBlocks(tableB);
    await gpu.warmUp();
    expect(Array.from(gpu.exportKvBlocks(tableB))).toEqual(Array.from(before));
    expect(Array.from(await gpu.exportKvBlocksAsync(tableB))).toEqual(Array.from(before));
  });

  test("exported KV blocks equal the reference's bytes and import back", async () => {
    for (const b of [gpu, ref] as Backend[]) { b.allocKvCache(shape); await fill(b, 0, tableA, 12, 90); await fill(b, 1, tableA, 12, 91); }
    const ids = Int32Array.from([2, 9]);
    // the synchronous export reads the host mirror, which is behind until the next read
    expect(() => gpu.exportKvBlocks(ids)).toThrow("the KV mirror is behind");
    const exported = await gpu.exportKvBlocksAsync(ids);
    expect(Array.from(exported)).toEqual(Array.from(ref.exportKvBlocks(ids)));
    await gpu.read(gpu.alloc(1), 1);
    expect(Array.from(gpu.exportKvBlocks(ids))).toEqual(Array.from(exported));
    gpu.allocKvCache(shape);
    gpu.importKvBlocks(Int32Array.from([5, 6]), exported);
    expect(Array.from(await gpu.exportKvBlocksAsync(Int32Array.from([5, 6])))).toEqual(Array.from(exported));
    expect(Array.from(gpu.exportKvBlocks(Int32Array.from([5, 6])))).toEqual(Array.from(exported));
  });
});

describe("top-k read-back (optional Backend.topK)", () => {
  function cpuTopK(row: Float32Array, k: number): number[] {
    const order = Array.from(row.keys()).filter((i) => row[i]! > -3e38).sort((a, b) => row[b]! - row[a]! || a - b);
    return Array.from({ length: k }, (_, i) => order[i] ?? -1);
  }

  test.each([1, 5, 40])("k = %d over 3 rows of 1000, with ties and -inf, equals a CPU sort", async (k) => {
    const cols = 1000;
    const data = randn(3 * cols, 50 + k, 8).map((v) => Math.round(v * 4) / 4); // many exact ties
    data[cols + 17] = -Infinity;
    data[2 * cols + 999] = 100; // the winner at the last column
    const src = gpu.alloc(data.length); gpu.write(src, data);
    const got = await gpu.topK(src, 3, cols, k);
    for (let r = 0; r < 3; r++) {
      const row = data.subarray(r * cols, (r + 1) * cols);
      const want = cpuTopK(row, k);
      expect(Array.from(got.ids.subarray(r * k, (r + 1) * k))).toEqual(want);
      expect(Array.from(got.values.subarray(r * k, (r + 1) * k))).toEqual(want.map((i) => row[i]!));
    }
  });

  test("a row of fewer than k finite values pads with id -1; bad k is one line", async () => {
    const src = gpu.alloc(8);
    gpu.write(src, Float32Array.from([-Infinity, 2, -Infinity, -Infinity, 2, -Infinity, -Infinity, -Infinity]));
    const got = await gpu.topK(src, 1, 8, 4);
    expect(Array.from(got.ids)).toEqual([1, 4, -1, -1]);
    expect(Array.from(got.values)).toEqual([2, 2, -Infinity, -Infinity]);
    await expect(gpu.topK(src, 1, 8, 0)).rejects.toThrow("topK: k must be an integer in [1, 8] (got 0)");
  });
});
