/**
 * What Ollama's model routes need beyond the orchestrator, handed in by `fennec serve` (the server may not read GGUF
 * files or reach the Hub itself, docs/architecture.md): the served file's GGUF metadata for /api/show and /api/tags,
 * and a Hub download for /api/pull. Both are optional, so tests and run-batch build the app without them.
 * @example createApp({ ...options, ollama: { metadata, fileSizeBytes, modifiedAt, pull } })
 */

/** One GGUF metadata value as /api/show prints it (bigints already narrowed to numbers or strings). */
export type GgufInfoValue = number | string | boolean | readonly (number | string | boolean)[];

/** One download step of a pull, reported as Ollama's NDJSON progress records (pull-progress.ts). */
export type PullEvent =
  | { readonly kind: "manifest" }
  | { readonly kind: "file"; readonly digest: string; readonly totalBytes: number; readonly completedBytes: number }
  | { readonly kind: "verifying" }
  | { readonly kind: "done"; readonly path: string };

export interface OllamaServing {
  /** the served GGUF's metadata (key -> value), in file order */
  readonly metadata?: ReadonlyMap<string, GgufInfoValue>;
  /** the served file's size in bytes (0 when unknown, e.g. the embedded model) */
  readonly fileSizeBytes?: number;
  /** when the served file was last modified (ms since the epoch) */
  readonly modifiedAtMs?: number;
  /**
   * downloads a Hugging Face model (`org/repo[:QUANT]`) into the cache, telling each step; absent = /api/pull answers
   * 400. A download runs to its end even when the client leaves (the next pull finds it in the cache).
   */
  readonly pull?: (model: string, onEvent: (event: PullEvent) => void) => Promise<void>;
}
