/**
 * GGUF reader and writer: every metadata value type and tensor types round-trip exactly; real llama.cpp files
 * re-serialize byte for byte; bad files give one error naming the file and the problem (never a throw).
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { GgufValueType, type GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { getArray, getBool, getF32, getString, getU32, mdArray, mdBool, mdF32, mdString, mdU32, optional } from "../../src/gguf/metadata.ts";
import { parseGguf, readGguf, tensorData } from "../../src/gguf/reader.ts";
import { serializeGguf, writeGgufFile, type GgufTensorToWrite } from "../../src/gguf/writer.ts";
import { byteSize, GgmlType, weightType } from "../../src/tensor/dtypes.ts";

// llama.cpp loads, model files and the first extraction of llama.cpp's vocab files take seconds on a busy 2-core box
setDefaultTimeout(120_000);

const dir = mkdtempSync(join(tmpdir(), "fennec-gguf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One entry of every value type, including awkward values. */
const METADATA: [string, GgufMetadataEntry][] = [
  ["general.architecture", mdString("llama")],
  ["t.u8", { type: GgufValueType.UINT8, value: 255 }],
  ["t.i8", { type: GgufValueType.INT8, value: -128 }],
  ["t.u16", { type: GgufValueType.UINT16, value: 65535 }],
  ["t.i16", { type: GgufValueType.INT16, value: -32768 }],
  ["t.u32", mdU32(4294967295)],
  ["t.i32", { type: GgufValueType.INT32, value: -2147483648 }],
  ["t.f32", mdF32(Math.fround(1e-5))],
  ["t.bool", mdBool(true)],
  ["t.string", mdString("héllo ▁wörld 🦊 \u{feff}bom")],
  ["t.empty-string", mdString("")],
  ["t.u64", { type: GgufValueType.UINT64, value: 18446744073709551615n }],
  ["t.i64", { type: GgufValueType.INT64, value: -9223372036854775808n }],
  ["t.f64", { type: GgufValueType.FLOAT64, value: Math.PI }],
  ["t.arr-str", mdArray(GgufValueType.STRING, ["<unk>", "▁a", "", "🦊"])],
  ["t.arr-f32", mdArray(GgufValueType.FLOAT32, [0, -1.5, Math.fround(0.1)])],
  ["t.arr-i32", mdArray(GgufValueType.INT32, [1, -2, 3])],
  ["t.arr-bool", mdArray(GgufValueType.BOOL, [true, false])],
  ["t.arr-u64", mdArray(GgufValueType.UINT64, [0n, 1n << 40n])],
  ["t.arr-empty", mdArray(GgufValueType.UINT8, [])],
];

function tensor(name: string, shape: number[], type: GgmlType, seed: number): GgufTensorToWrite {
  const size = byteSize(weightType(type)!, shape.reduce((a, b) => a * b, 1));
  return { name, shape, type, data: new Uint8Array(size).map((_, i) => (i * 31 + seed) & 255) };
}
const TENSORS = [
  tensor("token_embd.weight", [64, 3], GgmlType.F32, 1),
  tensor("odd.f16", [3], GgmlType.F16, 2), // 6 bytes: the next tensor needs padding
  tensor("blk.0.attn_q.weight", [32, 2], GgmlType.Q8_0, 3),
  tensor("blk.0.ffn_down.weight", [256, 2, 1], GgmlType.Q6_K, 4),
  tensor("blk.0.bf16", [5, 1, 1, 2], GgmlType.BF16, 5),
];

function sample(alignment?: number): Uint8Array {
  const metadata = new Map(METADATA);
  if (alignment !== undefined) metadata.set("general.alignment", mdU32(alignment));
  return serializeGguf({ metadata, tensors: TENSORS });
}

function parsed(bytes: Uint8Array) {
  const file = parseGguf(bytes, "test.gguf");
  if (!file.ok) throw new Error(file.error);
  return file.value;
}

describe("round trip", () => {
  test.each([undefined, 64, 1])("metadata and tensors come back exactly (alignment %p)", (alignment) => {
    const file = parsed(sample(alignment));
    expect(file.version).toBe(3);
    expect(file.alignment).toBe(alignment ?? 32);
    for (const [key, entry] of METADATA) expect(file.metadata.get(key)).toEqual(entry);
    expect(file.tensors.map((t) => t.name)).toEqual(TENSORS.map((t) => t.name));
    file.tensors.forEach((info, i) => {
      expect(info.shape).toEqual(TENSORS[i]!.shape);
      expect(info.type).toBe(TENSORS[i]!.type);
      expect(info.offset % file.alignment).toBe(0);
      expect(tensorData(file, info)).toEqual(TENSORS[i]!.data as Uint8Array);
    });
  });

  test("tensor views are zero-copy", () => {
    const file = parsed(sample());
    const view = tensorData(file, file.tensors[0]!);
    expect(view.buffer).toBe(file.bytes.buffer);
  });

  test("version 2 files parse the same", () => {
    const bytes = sample();
    new DataView(bytes.buffer).setUint32(4, 2, true);
    const file = parsed(bytes);
    expect(file.version).toBe(2);
    expect(file.tensors.length).toBe(TENSORS.length);
  });

  test("writeGgufFile streams lazily produced tensors and readGguf maps them", () => {
    const path = join(dir, "streamed.gguf");
    let calls = 0;
    const progress: number[] = [];
    const lazy = TENSORS.map((t) => ({ ...t, data: () => { calls++; return t.data as Uint8Array; } }));
    const written = writeGgufFile(path, { metadata: new Map(METADATA), tensors: lazy }, (done) => progress.push(done));
    expect(calls).toBe(TENSORS.length);
    expect(progress.length).toBe(TENSORS.length);
    expect(progress.at(-1)).toBe(written);
    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    expect(file.value.bytes.length).toBe(written);
    expect(file.value.bytes).toEqual(sample());
    expect(file.value.source).toBe(path);
  });

  test.each(["gpt-2", "llama-spm", "qwen2"])("llama.cpp's ggml-vocab-%s.gguf re-serializes byte for byte", (name) => {
    const file = readGguf(llamaVocabPath(name));
    if (!file.ok) throw new Error(file.error);
    const again = serializeGguf({ metadata: file.value.metadata, tensors: [] });
    expect(file.value.tensors.length).toBe(0);
    expect(Buffer.compare(again, file.value.bytes)).toBe(0);
  });
});

describe("typed metadata accessors", () => {
  const file = parsed(sample());
  test("read the right types", () => {
    expect(getString(file, "general.architecture")).toEqual({ ok: true, value: "llama" });
    expect(getU32(file, "t.u8")).toEqual({ ok: true, value: 255 });
    expect(getU32(file, "t.u32")).toEqual({ ok: true, value: 4294967295 });
    expect(getF32(file, "t.f64")).toEqual({ ok: true, value: Math.PI });
    expect(getBool(file, "t.bool")).toEqual({ ok: true, value: true });
    expect(getArray(file, "t.arr-str", GgufValueType.STRING).ok).toBe(true);
    expect(optional(file, "no.such.key", getU32)).toEqual({ ok: true, value: undefined });
  });
  test("errors name the file and the key", () => {
    expect(getU32(file, "no.such.key")).toEqual({ ok: false, error: 'test.gguf: missing metadata key "no.such.key"' });
    expect(getU32(file, "t.string")).toEqual({ ok: false, error: 'test.gguf: metadata key "t.string" should be an integer but is string' });
    expect(getU32(file, "t.i8")).toEqual({ ok: false, error: 'test.gguf: metadata key "t.i8" is -128, outside the u32 range' });
    expect(getArray(file, "t.arr-f32", GgufValueType.STRING)).toEqual({
      ok: false, error: 'test.gguf: metadata key "t.arr-f32" should be an array of string but is array of float32',
    });
    expect(optional(file, "t.bool", getString).ok).toBe(false);
  });
});

/** Where things are in sample(): the header field offsets we patch. */
function findBytes(haystack: Uint8Array, needle: string): number {
  return Buffer.from(haystack).indexOf(Buffer.from(needle));
}

describe("bad files give one clear error", () => {
  const expectError = (bytes: Uint8Array, pattern: RegExp) => {
    const file = parseGguf(bytes, "bad.gguf");
    expect(file.ok).toBe(false);
    if (!file.ok) {
      expect(file.error).toMatch(/^bad\.gguf: /);
      expect(file.error).not.toContain("\n");
      expect(file.error).toMatch(pattern);
    }
  };

  test("wrong magic", () => expectError(new TextEncoder().encode("GGML and more bytes"), /not a GGUF file/));
  test("unknown and obsolete versions", () => {
    const bytes = sample();
    const view = new DataView(bytes.buffer);
    view.setUint32(4, 1, true);
    expectError(bytes, /unsupported GGUF version 1 .*obsolete/);
    view.setUint32(4, 7, true);
    expectError(bytes, /unsupported GGUF version 7/);
    view.setUint32(4, 0x03000000, true);
    expectError(bytes, /big-endian/);
  });

  test("every truncation of the header is caught, never thrown", () => {
    const bytes = sample();
    const dataStart = parsed(bytes).tensors[0]!.offset;
    for (let cut = 0; cut < dataStart; cut += 7) expectError(bytes.subarray(0, cut), /truncated|not a GGUF/);
  });

  test("tensor data past the end of the file", () => {
    const bytes = sample();
    const last = parsed(bytes).tensors.at(-1)!;
    expectError(bytes.subarray(0, last.offset + 3), /tensor "blk\.0\.bf16" \(20 bytes at offset \d+\) runs past the end of the file/);
  });

  test("unsupported tensor type names the tensor and the type", () => {
    const bytes = sample();
    // the type field follows the name and dims of the first tensor: u32 nDims=2, u64 64, u64 3, then u32 type
    const at = findBytes(bytes, "token_embd.weight") + "token_embd.weight".length + 4 + 16;
    new DataView(bytes.buffer).setUint32(at, GgmlType.Q4_K - 2 /* q2_K */, true);
    expectError(bytes, /tensor "token_embd\.weight" has type q2_K \(10\), which fennec does not support/);
    new DataView(bytes.buffer).setUint32(at, 999, true);
    expectError(bytes, /tensor "token_embd\.weight" has type unknown type 999/);
  });

  test("row length not a multiple of the block size", () => {
    const bytes = sample();
    const at = findBytes(bytes, "blk.0.attn_q.weight") + "blk.0.attn_q.weight".length + 4;
    new DataView(bytes.buffer).setBigUint64(at, 48n, true);
    expectError(bytes, /"blk\.0\.attn_q\.weight" of type q8_0 has row length 48, not a multiple of its block size 32/);
  });

  test("bad alignment: not a power of two, wrong type, misaligned tensor offset", () => {
    const odd = sample(64);
    new DataView(odd.buffer).setUint32(findBytes(odd, "general.alignment") + "general.alignment".length + 4, 48, true);
    expectError(odd, /general\.alignment is 48, not a power of two/);
    const metadata = new Map(METADATA);
    metadata.set("general.alignment", { type: GgufValueType.UINT64, value: 32n });
    const bytes = serializeGguf({ metadata: new Map(METADATA), tensors: TENSORS });
    const withU64 = (() => { try { return serializeGguf({ metadata, tensors: TENSORS }); } catch (e) { return e; } })();
    expect(withU64).toBeInstanceOf(Error); // the writer refuses it too
    const name = "blk.0.attn_q.weight";
    const at = findBytes(bytes, name) + name.length + 4 + 16 + 4;
    const view = new DataView(bytes.buffer);
    view.setBigUint64(at, view.getBigUint64(at, true) + 4n, true);
    expectError(bytes, /tensor "blk\.0\.attn_q\.weight" has data offset \d+, not a multiple of the alignment 32/);
  });

  test("absurd counts and lengths fail fast", () => {
    const bytes = sample();
    new DataView(bytes.buffer).setBigUint64(16, 1n << 50n, true); // kv count
    expectError(bytes, /truncated/);
  });

  test("files on disk: missing, a folder, empty, garbage", () => {
    expect(readGguf(join(dir, "nope.gguf"))).toEqual({ ok: false, error: `${join(dir, "nope.gguf")}: file not found` });
    mkdirSync(join(dir, "folder.gguf"));
    expect(readGguf(join(dir, "folder.gguf"))).toEqual({ ok: false, error: `${join(dir, "folder.gguf")}: not a regular file` });
    writeFileSync(join(dir, "empty.gguf"), "");
    expect(readGguf(join(dir, "empty.gguf"))).toEqual({ ok: false, error: `${join(dir, "empty.gguf")}: file is empty` });
    writeFileSync(join(dir, "junk.gguf"), "GGUF\x03\x00");
    const junk = readGguf(join(dir, "junk.gguf"));
    expect(junk.ok ? "" : junk.error).toMatch(/junk\.gguf: file is truncated/);
  });
});
