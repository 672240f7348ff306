/**
 * Reading a JSON request body: refused with 413 past the size limit while it streams in, with a 400 naming the
 * nesting limit as soon as the chunks nest too deep, and with a 400 of its own when it is not JSON or not an object.
 * Bodies over OFF_THREAD_BYTES are decoded, checked and parsed in a Worker (json-parse-worker.ts): JSON.parse and the
 * string building of a 15 MB body held the event loop for 50-150 ms, which /health and every stream felt.
 * @example const { body, rawText } = await parseJsonObject(request, 1 << 20);
 */
import { workerEntryUrl } from "../util/compiled-entry.ts";
import { MAX_JSON_DEPTH, nestingError } from "./body-limits.ts";
import { NestingScanner } from "../util/json-limits.ts";
import { ApiError } from "./errors.ts";
import type { FromJsonParser, PromptCharBound, ToJsonParser } from "./json-parse-worker.ts";

/**
 * The route's prompt bound for a large body (server/openai/prompt-text.ts promptBoundFor): the Worker counts the
 * prompt's characters and the main thread only builds the route's own 400 from the count.
 */
export interface PromptBound extends PromptCharBound {
  readonly refuse: (numChars: number) => ApiError;
}

/** Bodies larger than this are parsed off the main thread (about a millisecond of parsing stays inline). */
export const OFF_THREAD_BYTES = 1024 * 1024;

const notJson = (): ApiError => new ApiError("invalidBody", "Request body is not valid JSON");

/** The body's bytes, refused with 413 once they pass `maxBytes`; `onChunk` sees each chunk as it arrives. */
async function readBodyChunks(request: Request, maxBytes: number, onChunk: (chunk: Uint8Array) => void): Promise<number> {
  if (request.body === null) return 0;
  let total = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return total;
    total += value.byteLength;
    try {
      if (total > maxBytes) throw new ApiError("payloadTooLarge", `Request body is larger than the limit of ${maxBytes} bytes.`);
      onChunk(value);
    } catch (e) {
      void reader.cancel();
      throw e;
    }
  }
}

/** The one parser Worker of the process, unref'd (it never keeps the process alive). */
let parser: { worker: Worker; pending: Map<number, (reply: FromJsonParser) => void>; nextId: number } | null = null;

/**
 * The chunks of a large body, kept as they arrive (no copy on the main thread: copying 15 MB into one buffer was the
 * largest part of the main thread's work for such a body) and transferred to the Worker, which joins them.
 */
class ChunkList {
  readonly chunks: Uint8Array[] = [];
  push(chunk: Uint8Array): void {
    // a chunk that is the whole of its buffer is transferred as it is; a view into a larger (shared or pooled) one is copied
    const owned = chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength && chunk.buffer instanceof ArrayBuffer;
    this.chunks.push(owned ? chunk : chunk.slice());
  }
  /** the buffers to transfer: the list is spent */
  transferables(): ArrayBuffer[] {
    return this.chunks.map((c) => c.buffer as ArrayBuffer);
  }
}

/** Starts the parser Worker now (createApp calls it): its start-up should not fall on the first large request. */
export function startJsonParser(): void {
  if (parser !== null) return;
    const worker = new Worker(workerEntryUrl(import.meta.url, "./json-parse-worker.ts", "server/json-parse-worker.js"));
    (worker as unknown as { unref?: () => void }).unref?.();
    const state = { worker, pending: new Map<number, (reply: FromJsonParser) => void>(), nextId: 0 };
    worker.onmessage = (event: MessageEvent<FromJsonParser>) => {
      const resolve = state.pending.get(event.data.id);
      state.pending.delete(event.data.id);
      resolve?.(event.data);
    };
  // a Worker that died answers nothing: fail what it held (a 400 each) and start a new one next time
  worker.onerror = () => {
    for (const [id, resolve] of state.pending) resolve({ id, ok: false, problem: "the body could not be parsed" });
    state.pending.clear();
    if (parser === state) parser = null;
  };
  parser = state;
}

/** Stops the parser Worker when nothing is parsing (a server with no model loaded); the next large body starts it again. */
export function stopJsonParser(): void {
  if (parser === null || parser.pending.size > 0) return;
  parser.worker.terminate();
  parser = null;
}

function parseOffThread(body: ChunkList, prompt: PromptCharBound | undefined): Promise<FromJsonParser> {
  startJsonParser();
  const state = parser!;
  const id = state.nextId++;
  return new Promise((resolve) => {
    state.pending.set(id, resolve);
    state.worker.postMessage({ id, chunks: body.chunks, maxDepth: MAX_JSON_DEPTH, ...(prompt !== undefined ? { prompt } : {}) } satisfies ToJsonParser, body.transferables());
  });
}

/**
 * The body as a JSON object. Small bodies are decoded and checked chunk by chunk as they arrive and parsed here, their
 * text returned as `rawText` for error messages (Elysia converts values before validating them); large ones are parsed
 * by the Worker (no raw text kept: re-parsing it for a message would cost what the Worker saved), which also refuses a
 * prompt over `promptBound` there (the route checks small bodies itself, with the same words).
 */
export async function parseJsonObject(request: Request, maxBytes: number, promptBound: PromptBound | null = null): Promise<{ body: Record<string, unknown>; rawText: string | null }> {
  let large: ChunkList | null = null;
  const inlineChunks: Uint8Array[] = [];
  const pieces: string[] = [];
  const decoder = new TextDecoder("utf-8");
  const scanner = new NestingScanner({ maxDepth: MAX_JSON_DEPTH });
  let inline = true;
  let bytes = 0;
  const checkText = (text: string): void => {
    const problem = scanner.feed(text);
    if (problem !== null) throw nestingError(problem);
    pieces.push(text);
  };
  await readBodyChunks(request, maxBytes, (chunk) => {
    bytes += chunk.byteLength;
    if (inline && bytes > OFF_THREAD_BYTES) {
      inline = false;
      pieces.length = 0;
      large = new ChunkList();
      for (const c of inlineChunks.splice(0)) large.push(c);
    }
    if (large !== null) { large.push(chunk); return; }
    inlineChunks.push(chunk);
    // nesting is checked as the chunks arrive: a 100k-deep body is refused before it is even read to the end
    checkText(decoder.decode(chunk, { stream: true }));
  });
  let value: unknown;
  let rawText: string | null = null;
  if (inline) {
    checkText(decoder.decode());
    const text = pieces.join("");
    try {
      value = JSON.parse(text);
    } catch {
      throw notJson();
    }
    rawText = text;
  } else {
    const bound = promptBound === null ? undefined : { field: promptBound.field, maxChars: promptBound.maxChars };
    const reply = await parseOffThread((large as ChunkList | null)!, bound);
    if (!reply.ok) {
      if (reply.problem === "prompt" && promptBound !== null) throw promptBound.refuse(reply.numChars ?? 0);
      throw reply.problem.startsWith("nesting: ") ? nestingError(reply.problem.slice("nesting: ".length)) : notJson();
    }
    value = reply.value;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ApiError("invalidBody", "Request body must be a JSON object");
  return { body: value as Record<string, unknown>, rawText };
}
