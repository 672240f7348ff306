/**
 * Splits a GGUF file into parts as llama.cpp's gguf-split does (--split-max-tensors): the first part keeps every
 * metadata key, each part carries split.no / split.count / split.tensors.count and its own tensors, and the parts
 * are named <prefix>-00001-of-0000N.gguf.
 * @example const parts = splitGgufFile("m.gguf", "/tmp/m-Q8_0", 2); // ["/tmp/m-Q8_0-00001-of-00002.gguf", ...]
 */
import { GgufValueType, type GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { readGguf, tensorData } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";

export function splitPartName(prefix: string, index: number, count: number): string {
  return `${prefix}-${String(index + 1).padStart(5, "0")}-of-${String(count).padStart(5, "0")}.gguf`;
}

export function splitGgufFile(source: string, prefix: string, count: number): string[] {
  const file = readGguf(source);
  if (!file.ok) throw new Error(file.error);
  const tensors = file.value.tensors;
  const perPart = Math.ceil(tensors.length / count);
  const paths: string[] = [];
  for (let i = 0; i < count; i++) {
    const split: [string, GgufMetadataEntry][] = [
      ["split.no", { type: GgufValueType.UINT16, value: i }],
      ["split.count", { type: GgufValueType.UINT16, value: count }],
      ["split.tensors.count", { type: GgufValueType.INT32, value: tensors.length }],
    ];
    const metadata = new Map<string, GgufMetadataEntry>(i === 0 ? [...file.value.metadata, ...split] : split);
    const mine = tensors.slice(i * perPart, (i + 1) * perPart).map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: tensorData(file.value, t) }));
    const path = splitPartName(prefix, i, count);
    writeGgufFile(path, { metadata, tensors: mine });
    paths.push(path);
  }
  return paths;
}
