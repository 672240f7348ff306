/**
 * A tiny entry point for checking that a compiled binary carries the default model: compile it with
 * `bun build --compile`, run it from any directory, and it prints the embedded model's path, size, sha256 and
 * tensor count as JSON (exit 1 if it cannot be read).
 */
import { createHash } from "node:crypto";
import { readGguf } from "../src/gguf/reader.ts";
import { DEFAULT_MODEL_SOURCE, defaultModelPath, loadDefaultModelBytes, openDefaultModel } from "../src/gguf/default-model.ts";

const bytes = await loadDefaultModelBytes();
const file = openDefaultModel();
const byPath = readGguf(defaultModelPath()); // the path API too (no mmap inside the binary: falls back to reading)
if (!byPath.ok) throw new Error(byPath.error);
console.log(JSON.stringify({
  path: defaultModelPath(),
  source: DEFAULT_MODEL_SOURCE,
  sizeBytes: bytes.length,
  sha256: createHash("sha256").update(bytes).digest("hex"),
  numTensors: file.tensors.length,
  numTensorsByPath: byPath.value.tensors.length,
}));
