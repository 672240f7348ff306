/**
 * The Worker that reads large JSON request bodies off the main thread (request-body.ts): decode, nesting check and
 * JSON.parse of a 15 MB body took the event loop for 50-150 ms at a time, during which /health and every stream
 * waited. Messages in: { id, body, length, maxDepth } (the body's bytes, transferred); out: { id, ok: true, value } or
 * { id, ok: false, problem } where problem is "nesting: ..." or "syntax".
 */
import { NestingScanner } from "../util/json-limits.ts";

declare const self: Worker;

export type ToJsonParser = { readonly id: number; readonly body: ArrayBuffer; readonly length: number; readonly maxDepth: number };
export type FromJsonParser = { readonly id: number; readonly ok: true; readonly value: unknown } | { readonly id: number; readonly ok: false; readonly problem: string };

self.onmessage = (event: MessageEvent<ToJsonParser>) => {
  const { id, body, length, maxDepth } = event.data;
  const text = new TextDecoder("utf-8").decode(new Uint8Array(body, 0, length));
  const nesting = new NestingScanner({ maxDepth }).feed(text);
  if (nesting !== null) { self.postMessage({ id, ok: false, problem: `nesting: ${nesting}` } satisfies FromJsonParser); return; }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    self.postMessage({ id, ok: false, problem: "syntax" } satisfies FromJsonParser);
    return;
  }
  self.postMessage({ id, ok: true, value } satisfies FromJsonParser);
};
