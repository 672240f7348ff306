/**
 * The responses fennec keeps for GET /v1/responses/{id}, previous_response_id, background runs and cancel (vLLM's
 * response_store / msg_store / event_store in vllm/entrypoints/openai/responses/serving.py). vLLM's dicts never
 * evict, which is why it keeps them off unless VLLM_ENABLE_RESPONSES_API_STORE=1; fennec's store is bounded instead:
 * at most `maxEntries` responses and `maxBytes` of JSON (response + chat messages + event buffer), least recently
 * used evicted first. A response still running is never evicted (its size is counted once it ends).
 * @example const store = new ResponseStore(); store.put(entry); store.get("resp_1");
 */
import type { ChatMessageBody } from "../schemas.ts";

/** Defaults: 1024 responses, 64 MiB of JSON. */
export const RESPONSE_STORE_LIMITS = { maxEntries: 1024, maxBytes: 64 * 1024 * 1024 } as const;

export type ResponseStatus = "queued" | "in_progress" | "completed" | "incomplete" | "cancelled" | "failed";

/** One SSE event of a background stream, as written. */
export interface StoredEvent {
  readonly type: string;
  readonly data: Record<string, unknown>;
}

export interface StoredResponse {
  readonly id: string;
  /** the response object as GET returns it (replaced as the run progresses) */
  response: Record<string, unknown>;
  /** the chat messages of the request (previous_response_id replays them) and its output as chat messages */
  inputMessages: readonly ChatMessageBody[];
  outputMessages: readonly ChatMessageBody[];
  /** background runs: every event so far, for GET ?stream=true&starting_after=N; null otherwise */
  events: StoredEvent[] | null;
  /** background runs: aborts the generation (cancel) */
  abort: AbortController | null;
  /** resolves waiters of the event buffer when an event arrives or the run ends */
  waiters: (() => void)[];
  /** the run ended (no more events) */
  done: boolean;
  sizeBytes: number;
}

export const isRunning = (entry: StoredResponse): boolean => !entry.done;

function sizeOf(entry: StoredResponse): number {
  const events = entry.events === null ? 0 : entry.events.reduce((sum, e) => sum + JSON.stringify(e.data).length, 0);
  return JSON.stringify(entry.response).length + JSON.stringify(entry.inputMessages).length + JSON.stringify(entry.outputMessages).length + events;
}

export class ResponseStore {
  /** insertion order = recency (a get moves the entry to the end) */
  private readonly entries = new Map<string, StoredResponse>();
  private totalBytes = 0;

  constructor(readonly limits: { readonly maxEntries: number; readonly maxBytes: number } = RESPONSE_STORE_LIMITS) {}

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  /** the entry, marked as just used; undefined when unknown or evicted */
  get(id: string): StoredResponse | undefined {
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    this.entries.delete(id);
    this.entries.set(id, entry);
    return entry;
  }

  put(entry: StoredResponse): void {
    this.delete(entry.id);
    this.entries.set(entry.id, entry);
    this.measure(entry);
  }

  /** re-measures an entry after its response or events changed, then evicts down to the limits */
  measure(entry: StoredResponse): void {
    if (this.entries.get(entry.id) !== entry) return;
    this.totalBytes -= entry.sizeBytes;
    entry.sizeBytes = isRunning(entry) ? 0 : sizeOf(entry);
    this.totalBytes += entry.sizeBytes;
    this.evict();
  }

  delete(id: string): boolean {
    const entry = this.entries.get(id);
    if (entry === undefined) return false;
    this.entries.delete(id);
    this.totalBytes -= entry.sizeBytes;
    return true;
  }

  /** least recently used finished entries go first; running ones stay */
  private evict(): void {
    for (const [id, entry] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.totalBytes <= this.limits.maxBytes) return;
      if (!isRunning(entry)) this.delete(id);
    }
  }
}

/** A new entry (not yet stored). */
export function newStoredResponse(id: string, response: Record<string, unknown>, inputMessages: readonly ChatMessageBody[], background: boolean): StoredResponse {
  return { id, response, inputMessages, outputMessages: [], events: background ? [] : null, abort: null, waiters: [], done: !background, sizeBytes: 0 };
}

/** Appends an event to a background entry's buffer and wakes its readers. */
export function pushEvent(entry: StoredResponse, event: StoredEvent): void {
  entry.events?.push(event);
  wake(entry);
}

export function wake(entry: StoredResponse): void {
  const waiters = entry.waiters;
  entry.waiters = [];
  for (const w of waiters) w();
}

/** Replays an entry's events after index `startingAfter`, then follows the live run until it ends. */
export async function* replayEvents(entry: StoredResponse, startingAfter: number): AsyncGenerator<StoredEvent> {
  let next = startingAfter + 1;
  for (;;) {
    const events = entry.events ?? [];
    while (next < events.length) yield events[next++]!;
    if (entry.done) return;
    await new Promise<void>((resolve) => entry.waiters.push(resolve));
  }
}
