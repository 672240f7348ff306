/**
 * A model's GGUF metadata as its front end needs it, read once on the main thread: the tokenizer (given to the
 * pipeline, which would otherwise parse the file for it) and the parsed file (Ollama's /api/show and details, which
 * parsed it a second time). Parsing a 150k-token vocabulary's metadata and building its tokenizer each take 100-300 ms
 * of the main thread, so the event loop gets a turn after the parse and every few ms of the tokenizer's tables:
 * /health and the other models' streams are served in between (llama.cpp's server loads a model in its own process;
 * here a load shares the HTTP thread).
 * @example const { tokenizer, gguf } = await readModelMetadata(config.model); startPipeline(..., { tokenizer });
 */
import type { GgufFile } from "../gguf/gguf-file.ts";
import { openModelGguf } from "../gguf/model-source.ts";
import { createTokenizerInSlices } from "../tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";

export interface ModelMetadata {
  /** null: the file or its tokenizer did not read; the pipeline then reads it itself and reports the error as always */
  readonly tokenizer: Tokenizer | null;
  readonly gguf: GgufFile | null;
}

/** ms of tokenizer building between two turns of the event loop */
const TOKENIZER_SLICE_MS = 4;

/** One turn of the event loop: the timers and sockets waiting run before the next piece of a load. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export async function readModelMetadata(modelPath: string | null): Promise<ModelMetadata> {
  const gguf = await openModelGguf(modelPath);
  if (!gguf.ok) return { tokenizer: null, gguf: null };
  await yieldToEventLoop();
  let tokenizer: Tokenizer | null = null;
  try {
    tokenizer = await createTokenizerInSlices(gguf.value, yieldToEventLoop, TOKENIZER_SLICE_MS);
  } catch {
    // bad tokenizer metadata: the pipeline's own attempt throws the same one-line error at its usual place
  }
  await yieldToEventLoop();
  return { tokenizer, gguf: gguf.value };
}
