/**
 * Opens the model file an engine runs: a GGUF path (the first part of a split model brings the others), or the
 * embedded default model when the path is null. Used by the
 * engine Worker (weights) and by the orchestrator on the main thread (tokenizer and config only; no weights loaded).
 * @example const gguf = await openModelGguf(null); if (!gguf.ok) throw new CliError(gguf.error);
 */
import type { GgufFile } from "./gguf-file.ts";
import { readGguf } from "./reader.ts";
import { joinSplitParts } from "./split-gguf.ts";
import { err, ok, type Result } from "../util/result.ts";
import { errorMessage } from "../util/error-message.ts";

export async function openModelGguf(modelPath: string | null): Promise<Result<GgufFile>> {
  if (modelPath !== null) {
    const file = readGguf(modelPath);
    return file.ok ? joinSplitParts(file.value) : file;
  }
  try {
    const { openDefaultModel } = await import("./default-model.ts");
    return ok(openDefaultModel());
  } catch (e) {
    return err(`embedded default model: ${errorMessage(e)}`);
  }
}
