/**
 * The embedded default model (stories260K by Andrej Karpathy, karpathy/tinyllamas, MIT; trained on TinyStories),
 * converted to GGUF by the build (default-model-build.ts -> build/default-model.gguf). `bun build --compile` embeds
 * the imported file, so the binary carries it and runs from any directory with nothing beside it; inside the binary
 * the path is a `$bunfs` path that fs can read but Bun.mmap cannot, so the bytes are read and parsed in memory.
 * In a source checkout where the build has not run yet, the first use converts it from ../shared/models.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { GgufFile } from "./gguf-file.ts";
import { parseGguf } from "./reader.ts";
import { errorMessage } from "../util/error-message.ts";

/** The label errors use for the embedded model instead of a path. */
export const DEFAULT_MODEL_SOURCE = "<embedded default model stories260K>";

const ROOT = join(import.meta.dir, "..", "..");

/** The imported path, or null in a checkout without build/default-model.gguf (a static import would not load). */
const embeddedPath: string | null = await import("../../build/default-model.gguf", { with: { type: "file" } })
  .then((m) => m.default)
  .catch(() => null);

/**
 * Path of the default model GGUF: `$bunfs/...` inside the compiled binary, build/default-model.gguf in a checkout.
 * @example readFileSync(defaultModelPath())
 */
export function defaultModelPath(): string {
  if (embeddedPath !== null) return embeddedPath;
  const out = join(ROOT, "build", "default-model.gguf");
  if (existsSync(out)) return out;
  // not built yet: convert it now (about 50 ms); required lazily: the compiled binary never gets here, and only this path needs the converter
  const { buildDefaultModelFromLocalFiles } = require("./default-model-build.ts") as typeof import("./default-model-build.ts");
  try {
    buildDefaultModelFromLocalFiles(join(ROOT, "..", "shared", "models"), out);
  } catch (e) {
    throw new Error(errorMessage(e));
  }
  return out;
}

/**
 * The default model's GGUF bytes.
 * @example const file = parseGguf(await loadDefaultModelBytes(), DEFAULT_MODEL_SOURCE);
 */
export async function loadDefaultModelBytes(): Promise<Uint8Array> {
  return Bun.file(defaultModelPath()).bytes();
}

/**
 * The default model, parsed (its ~1 MB is read into memory). Throws an Error (one line) if it cannot be read; openModelGguf returns it as a Result.
 * @example const gguf = openDefaultModel(); const tokenizer = createTokenizer(gguf); // tokenizer/gguf-tokenizer.ts
 */
export function openDefaultModel(): GgufFile {
  const file = parseGguf(new Uint8Array(readFileSync(defaultModelPath())), DEFAULT_MODEL_SOURCE);
  if (!file.ok) throw new Error(file.error);
  return file.value;
}
