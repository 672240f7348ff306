/**
 * The Worker that reads large JSON request bodies off the main thread (request-body.ts): decode, nesting check and
 * JSON.parse of a 15 MB body took the event loop for 50-150 ms at a time, during which /health and every stream
 * waited. Messages in: { id, chunks, maxDepth, prompt? } (the body's chunks, transferred; the route's prompt bound);
 * out: { id, ok: true, value }, { id, ok: false, problem } where problem is "nesting: ..." or "syntax", or
 * { id, ok: false, problem: "prompt", numChars } when the longest prompt has more characters than the bound: such a body
 * is refused without its 15 MB string being copied back to the main thread (that copy and its garbage held /health).
 */
import { NestingScanner } from "../util/json-limits.ts";
import { promptChars, type PromptField } from "../util/prompt-chars.ts";

declare const self: Worker;

/** the route's prompt field and the most characters a prompt of this model can have */
export type PromptCharBound = { readonly field: PromptField; readonly maxChars: number };
export type ToJsonParser = { readonly id: number; readonly chunks: readonly Uint8Array[]; readonly maxDepth: number; readonly prompt?: PromptCharBound };
export type FromJsonParser =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly problem: string; readonly numChars?: number };

/** The body's bytes in one buffer (the copy the main thread no longer makes). */
function joinChunks(chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  let length = 0;
  for (const c of chunks) length += c.byteLength;
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const c of chunks) { bytes.set(c, offset); offset += c.byteLength; }
  return bytes;
}

self.onmessage = (event: MessageEvent<ToJsonParser>) => {
  const { id, chunks, maxDepth, prompt } = event.data;
  const text = new TextDecoder("utf-8").decode(joinChunks(chunks));
  const nesting = new NestingScanner({ maxDepth }).feed(text);
  if (nesting !== null) { self.postMessage({ id, ok: false, problem: `nesting: ${nesting}` } satisfies FromJsonParser); return; }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    self.postMessage({ id, ok: false, problem: "syntax" } satisfies FromJsonParser);
    return;
  }
  if (prompt !== undefined && typeof value === "object" && value !== null && !Array.isArray(value)) {
    const numChars = promptChars(value as Record<string, unknown>, prompt.field);
    if (numChars > prompt.maxChars) { self.postMessage({ id, ok: false, problem: "prompt", numChars } satisfies FromJsonParser); return; }
  }
  self.postMessage({ id, ok: true, value } satisfies FromJsonParser);
};
