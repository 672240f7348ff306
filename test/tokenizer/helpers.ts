/**
 * Test helpers for the tokenizer suite: loading llama.cpp's vocab GGUFs and their .inp/.out vectors.
 * `readGgufMetadata` is a deliberately tiny, metadata-only GGUF v2/v3 parser used until (or besides) src/gguf/reader.ts;
 * it fills the `GgufFile` contract with no tensors and is only meant for the well-formed vocab files of these tests.
 */
import { readFileSync } from "node:fs";
import { GgufValueType, type GgufArray, type GgufFile, type GgufMetadataEntry, type GgufScalar } from "../../src/gguf/gguf-file.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { createTokenizer, type Tokenizer } from "../../src/tokenizer/tokenizer.ts";

export function readGgufMetadata(path: string): GgufFile {
  const bytes = new Uint8Array(readFileSync(path));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
  let pos = 0;
  const u32 = () => { const v = view.getUint32(pos, true); pos += 4; return v; };
  const u64 = () => { const v = Number(view.getBigUint64(pos, true)); pos += 8; return v; };
  const str = () => { const n = u64(); const s = utf8.decode(bytes.subarray(pos, pos + n)); pos += n; return s; };
  const scalar = (type: GgufValueType): GgufScalar => {
    switch (type) {
      case GgufValueType.UINT8: return view.getUint8(pos++);
      case GgufValueType.INT8: return view.getInt8(pos++);
      case GgufValueType.UINT16: { const v = view.getUint16(pos, true); pos += 2; return v; }
      case GgufValueType.INT16: { const v = view.getInt16(pos, true); pos += 2; return v; }
      case GgufValueType.UINT32: return u32();
      case GgufValueType.INT32: { const v = view.getInt32(pos, true); pos += 4; return v; }
      case GgufValueType.FLOAT32: { const v = view.getFloat32(pos, true); pos += 4; return v; }
      case GgufValueType.BOOL: return view.getUint8(pos++) !== 0;
      case GgufValueType.STRING: return str();
      case GgufValueType.UINT64: { const v = view.getBigUint64(pos, true); pos += 8; return v; }
      case GgufValueType.INT64: { const v = view.getBigInt64(pos, true); pos += 8; return v; }
      case GgufValueType.FLOAT64: { const v = view.getFloat64(pos, true); pos += 8; return v; }
      default: throw new Error(`${path}: unsupported GGUF value type ${type} at byte ${pos}`);
    }
  };
  if (u32() !== 0x46554747) throw new Error(`${path}: not a GGUF file`);
  const version = u32();
  u64(); // n_tensors: unused here
  const numKv = u64();
  const metadata = new Map<string, GgufMetadataEntry>();
  for (let i = 0; i < numKv; i++) {
    const key = str();
    const type = u32() as GgufValueType;
    if (type === GgufValueType.ARRAY) {
      const elementType = u32() as GgufValueType;
      const count = u64();
      const values: GgufScalar[] = new Array(count);
      for (let j = 0; j < count; j++) values[j] = scalar(elementType);
      const value: GgufArray = { elementType, values };
      metadata.set(key, { type, value });
    } else {
      metadata.set(key, { type, value: scalar(type) });
    }
  }
  return { source: path, version, alignment: 32, metadata, tensors: [], bytes };
}

/** One llama.cpp test case: the input string and the expected ids (add_special=false, parse_special=false). */
export interface VocabCase { readonly text: string; readonly ids: number[] }

export function readVocabCases(name: string): VocabCase[] {
  const inputs = readFileSync(llamaVocabPath(name, ".inp"), "utf8").split("\n__ggml_vocab_test__\n");
  inputs.pop(); // one separator follows the last string
  const outputs = readFileSync(llamaVocabPath(name, ".out"), "utf8").split("\n");
  if (outputs.at(-1) === "") outputs.pop();
  if (inputs.length !== outputs.length) throw new Error(`${name}: ${inputs.length} inputs but ${outputs.length} outputs`);
  return inputs.map((text, i) => ({ text, ids: outputs[i]!.trim() === "" ? [] : outputs[i]!.trim().split(/\s+/).map(Number) }));
}

export function loadVocabTokenizer(name: string): Tokenizer {
  return createTokenizer(readGgufMetadata(llamaVocabPath(name)));
}
