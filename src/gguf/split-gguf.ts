/**
 * Split GGUF models (llama.cpp's gguf-split: `name-00001-of-00003.gguf` ...): the first part holds the metadata and
 * some tensors, every part carries `split.no`, `split.count` and `split.tensors.count` (llama.cpp llama-model-loader.cpp,
 * LLM_KV_SPLIT_*), and the other parts sit beside the first under llama_split_path's names. The parts are mapped one
 * by one and joined into one GgufFile whose tensors name the part their bytes are in.
 * @example const whole = joinSplitParts(firstPart); // the same file when it is not split
 */
import type { GgufFile } from "./gguf-file.ts";
import { MAX_MODEL_FILE_BYTES, readGguf } from "./reader.ts";
import { err, ok, type Result } from "../util/result.ts";

const SPLIT_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

function splitNumber(file: GgufFile, key: string): number | null {
  const entry = file.metadata.get(key);
  return entry === undefined || typeof entry.value === "object" ? null : Number(entry.value);
}

export function joinSplitParts(first: GgufFile): Result<GgufFile> {
  const count = splitNumber(first, "split.count");
  if (count === null || count <= 1) return ok(first);
  const name = SPLIT_NAME.exec(first.source);
  if (name === null) return err(`${first.source}: the file is part of a ${count}-part split model, but its name is not <name>-00001-of-${String(count).padStart(5, "0")}.gguf, so its other parts cannot be found`);
  if (splitNumber(first, "split.no") !== 0 || Number(name[2]) !== 1) {
    return err(`${first.source}: this is part ${Number(name[2])} of a split model: give the first part, ${name[1]}-00001-of-${name[3]}.gguf`);
  }
  if (first.parts !== undefined) return err(`${first.source}: a part of a split model over 2 GiB is not supported (split it into smaller parts)`);
  const parts: Uint8Array[] = [first.bytes];
  // positioned reads only when every part is a mapped file (reader.ts readTensorBytes)
  const files = first.files === undefined ? undefined : [...first.files];
  const tensors = [...first.tensors];
  let totalBytes = first.bytes.byteLength;
  for (let i = 1; i < count; i++) {
    const path = `${name[1]}-${String(i + 1).padStart(5, "0")}-of-${String(count).padStart(5, "0")}.gguf`;
    const part = readGguf(path);
    if (!part.ok) return err(`part ${i + 1} of ${count} of the split model ${first.source}: ${part.error}`);
    if (part.value.parts !== undefined) return err(`${path}: a part of a split model over 2 GiB is not supported (split it into smaller parts)`);
    if (splitNumber(part.value, "split.no") !== i || splitNumber(part.value, "split.count") !== count) {
      return err(`${path}: its split.no / split.count do not say part ${i + 1} of ${count}: the parts come from different splits`);
    }
    totalBytes += part.value.bytes.byteLength;
    parts.push(part.value.bytes);
    if (files !== undefined && part.value.files !== undefined) files.push(...part.value.files);
    for (const t of part.value.tensors) tensors.push({ ...t, part: i });
  }
  if (totalBytes > MAX_MODEL_FILE_BYTES) {
    return err(`${first.source}: the ${count} parts hold ${(totalBytes / 2 ** 30).toFixed(2)} GiB, over the 32 GiB the kernels' 8 wasm32 memories hold; use a smaller quantization (e.g. Q4_K_M) or a smaller model`);
  }
  const expected = splitNumber(first, "split.tensors.count");
  if (expected !== null && expected !== tensors.length) return err(`${first.source}: the split model names ${expected} tensors but its ${count} parts hold ${tensors.length}`);
  const names = new Set<string>();
  for (const t of tensors) {
    if (names.has(t.name)) return err(`${first.source}: tensor ${t.name} is in more than one part of the split model`);
    names.add(t.name);
  }
  const { files: _firstFiles, ...rest } = first;
  return ok({ ...rest, tensors, parts, ...(files !== undefined && files.length === count ? { files } : {}) });
}
