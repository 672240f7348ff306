/**
 * The payload of a text edge: the previous stage's output text, UTF-8, which the next stage tokenizes with its own
 * tokenizer as its prompt (that tokenization is the upstream stage's postprocess_time_ms, as vLLM-Omni's
 * custom_process_input_func is).
 */
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** @example encodeText("Once upon a time") // Uint8Array of 16 bytes */
export function encodeText(text: string): Uint8Array {
  return encoder.encode(text);
}

export function decodeText(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}
