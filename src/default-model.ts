/**
 * The embedded default model, for the CLI and server wiring: its path (a `$bunfs` path inside the compiled binary)
 * and its bytes. The implementation lives in gguf/default-model.ts, which gguf-level code imports directly.
 * @example const file = parseGguf(await loadDefaultModelBytes(), DEFAULT_MODEL_SOURCE);
 */
export { DEFAULT_MODEL_SOURCE, defaultModelPath, loadDefaultModelBytes, openDefaultModel } from "./gguf/default-model.ts";
