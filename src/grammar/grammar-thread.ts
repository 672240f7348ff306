/**
 * The engine Worker's handle on its grammar thread (grammar-worker.ts): compile a request's grammar, keep its
 * matcher in step with the tokens the engine samples, and fetch next-token bitmasks, one fill per engine step.
 * Per request it mirrors every accepted token, so a thread that xgrammar poisoned (an abort inside WASM) is replaced
 * and every live matcher is rebuilt by replaying its tokens; the engine only sees a slower fill. Speculative decoding:
 * a fill takes each request's drafts and returns a mask per draft position (grammar-protocol.ts FillRow).
 * Started lazily: an engine that never gets a structured request never loads xgrammar.
 * @example const g = new GrammarThreadClient(init, onLost); await g.compile("r1", spec, [2]); const m = await g.fill(["r1"]);
 */
import { workerEntryUrl } from "../util/compiled-entry.ts";
import type { GrammarSpec } from "./grammar-spec.ts";
import { fillRowStarts, type FillRow, type FillStatus, type FromGrammar, type GrammarThreadInit, type ToGrammar } from "./grammar-protocol.ts";
import { unreachable } from "../util/result.ts";

export type CompileResult =
  | { readonly ok: true; readonly compileMs: number; readonly cached: boolean }
  | { readonly ok: false; readonly message: string };

export interface FillResult {
  /** int32 words per row: ceil(vocabSize / 32) */
  readonly words: number;
  /** [rowStart.at(-1), words] bit set = allowed; request r's mask at position j (after j drafts) is row rowStart[r] + j */
  readonly masks: Int32Array;
  /** [requestIds.length + 1] */
  readonly rowStart: readonly number[];
  readonly status: readonly FillStatus[];
}

/** A request in a fill: its id, and the drafted tokens it verifies this step (speculative decoding). */
export interface FillRequest {
  readonly requestId: string;
  readonly drafts: readonly number[];
}

interface FillInFlight {
  readonly fillId: number;
  readonly requests: readonly FillRequest[];
  readonly withMasks: boolean;
  readonly resolve: (r: FillResult) => void;
}

interface RequestGrammar {
  readonly spec: GrammarSpec;
  readonly stopTokenIds: readonly number[];
  /** every token accepted so far, in order */
  readonly history: number[];
  /** how many of history the thread's matcher has seen */
  synced: number;
  /** tokens the thread's matcher must undo before taking history[synced..] */
  rollBackPending: number;
  /** set while the first compile is in flight */
  onCompiled: ((result: CompileResult) => void) | null;
}

function defaultWorkerUrl(): string {
  return workerEntryUrl(import.meta.url, "./grammar-worker.ts", "grammar/grammar-worker.js");
}

export class GrammarThreadClient {
  private worker: Worker | null = null;
  /** bumps on every (re)start: messages of a replaced thread are dropped */
  private generation = 0;
  private readonly requests = new Map<string, RequestGrammar>();
  private nextFillId = 1;
  private fillInFlight: FillInFlight | null = null;
  private restartNeeded = false;
  /** the thread's TokenizerInfo build time, once ready (ms) */
  tokenizerInfoMs: number | null = null;
  numRestarts = 0;

  /**
   * @param onLost a live request's grammar could not be rebuilt on a new thread: the engine fails that request
   */
  constructor(
    private readonly init: GrammarThreadInit,
    private readonly onLost: (requestId: string, message: string) => void,
    private readonly workerUrl: string = defaultWorkerUrl(),
  ) {}

  get numRequests(): number { return this.requests.size; }

  /** Compiles (or reuses) the grammar and starts the request's matcher; resolves when it is ready or failed. */
  compile(requestId: string, spec: GrammarSpec, stopTokenIds: readonly number[]): Promise<CompileResult> {
    return new Promise((resolve) => {
      this.requests.set(requestId, { spec, stopTokenIds, history: [], synced: 0, rollBackPending: 0, onCompiled: resolve });
      this.send({ type: "compile", requestId, spec, stopTokenIds });
    });
  }

  /** Records a sampled token; the matcher takes it with the next fill. */
  accept(requestId: string, tokenId: number): void {
    this.requests.get(requestId)?.history.push(tokenId);
  }

  /** Forgets the last n accepted tokens (speculative decoding: rejected drafts). */
  rollBack(requestId: string, n: number): void {
    const r = this.requests.get(requestId);
    if (!r || n <= 0) return;
    const unsent = r.history.length - r.synced;
    r.history.length = Math.max(0, r.history.length - n);
    if (n > unsent) {
      const undo = Math.min(n - unsent, r.synced);
      r.synced -= undo;
      r.rollBackPending += undo;
    }
  }

  /**
   * The next-token bitmask of each request, after its matcher took every token accepted so far; with drafts, one per
   * draft position and one after them, for the drafts the grammar accepts (status numValidDrafts). One at a time.
   */
  fill(requests: readonly (string | FillRequest)[]): Promise<FillResult> {
    return this.startFill(requests.map((r) => (typeof r === "string" ? { requestId: r, drafts: [] } : r)), true);
  }

  /**
   * How many of each request's drafts the grammar accepts, in order (vLLM XgrammarGrammar.validate_tokens: the
   * longest valid prefix; the matcher ends where it started). Shares the one-at-a-time slot with fill.
   */
  async validateDrafts(requests: readonly FillRequest[]): Promise<readonly FillStatus[]> {
    return (await this.startFill(requests, false)).status;
  }

  private startFill(requests: readonly FillRequest[], withMasks: boolean): Promise<FillResult> {
    if (this.fillInFlight) throw new Error("GrammarThreadClient.fill: one fill at a time");
    if (this.restartNeeded) this.restart();
    return new Promise((resolve) => {
      this.fillInFlight = { fillId: this.nextFillId++, requests, withMasks, resolve };
      this.sendFill();
    });
  }

  free(requestIds: readonly string[]): void {
    const known = requestIds.filter((id) => this.requests.delete(id));
    if (known.length > 0 && this.worker) this.send({ type: "free", requestIds: known });
  }

  dispose(): void {
    this.worker?.terminate();
    this.worker = null;
  }

  private sendFill(): void {
    const inFlight = this.fillInFlight!;
    const rows: FillRow[] = inFlight.requests.map(({ requestId, drafts }) => {
      const r = this.requests.get(requestId);
      if (!r) return { requestId, rollBack: 0, accept: [], drafts };
      const row = { requestId, rollBack: r.rollBackPending, accept: r.history.slice(r.synced), drafts };
      r.synced = r.history.length;
      r.rollBackPending = 0;
      return row;
    });
    this.send({ type: "fill", fillId: inFlight.fillId, rows, withMasks: inFlight.withMasks });
  }

  private send(message: ToGrammar): void {
    if (!this.worker) this.start();
    this.worker!.postMessage(message);
  }

  private start(): void {
    const generation = ++this.generation;
    const worker = new Worker(this.workerUrl);
    this.worker = worker;
    worker.onmessage = (event: MessageEvent<FromGrammar>) => { if (generation === this.generation) this.receive(event.data); };
    worker.onerror = () => { if (generation === this.generation) this.restart(); };
    worker.postMessage({ type: "init", init: this.init } satisfies ToGrammar);
  }

  /** A new thread: every live grammar compiled again and its tokens replayed with the next fill. */
  private restart(): void {
    this.restartNeeded = false;
    this.numRestarts++;
    this.worker?.terminate();
    this.worker = null;
    this.start();
    for (const [requestId, r] of this.requests) {
      r.synced = 0;
      r.rollBackPending = 0;
      this.send({ type: "compile", requestId, spec: r.spec, stopTokenIds: r.stopTokenIds });
    }
    if (this.fillInFlight) this.sendFill();
  }

  private receive(message: FromGrammar): void {
    switch (message.type) {
      case "ready":
        this.tokenizerInfoMs = message.tokenizerInfoMs;
        return;
      case "compiled": {
        const r = this.requests.get(message.requestId);
        if (!r?.onCompiled) return;
        const done = r.onCompiled;
        r.onCompiled = null;
        done({ ok: true, compileMs: message.compileMs, cached: message.cached });
        return;
      }
      case "compileFailed": {
        const r = this.requests.get(message.requestId);
        this.requests.delete(message.requestId);
        if (message.poisoned) this.restartNeeded = true;
        if (r?.onCompiled) r.onCompiled({ ok: false, message: message.message });
        else if (r) this.onLost(message.requestId, message.message);
        // with no fill coming (nothing running), replace the thread now so the next compile meets a clean one
        if (this.restartNeeded && !this.fillInFlight) this.restart();
        return;
      }
      case "filled": {
        const inFlight = this.fillInFlight;
        if (!inFlight || inFlight.fillId !== message.fillId) return;
        this.fillInFlight = null;
        inFlight.resolve({ words: message.words, masks: message.masks, rowStart: fillRowStarts(inFlight.requests), status: message.status });
        if (this.restartNeeded) this.restart();
        return;
      }
      case "fatal":
        this.restart();
        return;
      default:
        unreachable(message);
    }
  }
}
