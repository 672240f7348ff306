/**
 * The engine's structured-output bookkeeping (vLLM StructuredOutputManager, vllm/v1/structured_output/__init__.py):
 * compiles a request's grammar off the step loop, says which requests a step constrains and from which position
 * (should_fill_bitmask), fills their bitmasks during the forward pass (grammar_bitmask), hands the sampler each
 * verified position's mask, advances the grammar on every emitted token (should_advance) and keeps only the drafts it
 * accepts (Scheduler.update_draft_token_ids -> validate_tokens). The grammar itself runs on its own thread
 * (grammar/grammar-thread.ts).
 */
import { GrammarThreadClient, type FillRequest, type FillResult } from "../grammar/grammar-thread.ts";
import type { GrammarVocab } from "../grammar/grammar-protocol.ts";
import type { EngineRequest } from "./protocol.ts";
import type { RequestState } from "./request.ts";
import type { ScheduledChunk } from "./scheduler.ts";

type StructuredOutputs = NonNullable<EngineRequest["sampling"]["structuredOutputs"]>;

/** What the grammar bookkeeping needs from the engine core. */
export interface GrammarBookkeepingOptions {
  readonly vocab: GrammarVocab;
  readonly vocabSize: number;
  /** compiled grammars kept for reuse */
  readonly cacheSize: number;
  /** the grammar thread's entry (tests); default: grammar/grammar-worker.ts */
  readonly workerUrl?: string;
  /** true while the request is still the engine's (not finished, aborted or replaced meanwhile) */
  readonly isLive: (state: RequestState) => boolean;
  /** fails an accepted request (its grammar would not compile, refused a token, or reached a dead end) */
  readonly failLate: (requestId: string, code: string, message: string) => void;
  /** a compile settled outside a step: the loop should look again */
  readonly onWake?: () => void;
  /** VLLM_LOGGING_LEVEL=DEBUG: a grammar compiled (or came from the cache) in this many ms */
  readonly onCompiled?: (requestId: string, compileMs: number, cached: boolean) => void;
}

/**
 * One step's grammar work: the first constrained position of each request that samples (0 = the next token, j = after
 * the j-th draft) and, once filled, each one's row in the fill.
 */
export interface StepGrammar {
  readonly from: ReadonlyMap<string, number>;
  readonly fill: FillResult | null;
  readonly row: ReadonlyMap<string, number>;
}

/** The bitmask at each verified position ([numDrafts + 1]; undefined before the grammar starts) and the drafts kept. */
export interface DraftMasks {
  readonly masks: (Int32Array | undefined)[];
  readonly numDrafts: number;
}

/**
 * The first position (0 = the next token, j = after the j-th draft) a request's grammar constrains this step, or null
 * when none: not compiled, or a reasoning-gated grammar whose reasoning has not ended and whose drafts hold no
 * reasoning end token (vLLM should_fill_bitmask; after a drafted end token the bitmask switches on in the same window).
 */
export function grammarStart(req: RequestState, drafts: readonly number[]): number | null {
  if (req.grammarStatus !== "ready") return null;
  if (req.reasoningEnded) return 0;
  const endIds = req.sampling.structuredOutputs!.reasoningEndTokenIds!;
  const end = drafts.findIndex((id) => endIds.includes(id));
  return end < 0 ? null : end + 1;
}

function grammarRejectedMessage(tokenId: number, requestId: string): string {
  return `Unexpected: grammar rejected tokens [${tokenId}] for request ${requestId}. Terminating request.`;
}

export class GrammarBookkeeping {
  /** the grammar thread, started by the first structured request */
  private client: GrammarThreadClient | null = null;
  /** compiles in flight; settle wakes waitForCompiles() */
  private numCompiling = 0;
  private settled: (() => void) | null = null;

  constructor(private readonly options: GrammarBookkeepingOptions | null) {}

  /** true when the engine was given the model's vocabulary (structured outputs are possible) */
  get available(): boolean { return this.options !== null; }
  /** requests whose grammar is compiling (they wait in the queue) */
  get numCompilingGrammars(): number { return this.numCompiling; }

  /** Compiles off the step loop; the request waits in the queue meanwhile (its queue time includes the compile). */
  start(state: RequestState, spec: StructuredOutputs): void {
    const o = this.options!;
    this.client ??= new GrammarThreadClient(
      { vocab: o.vocab, vocabSize: o.vocabSize, cacheSize: o.cacheSize },
      (requestId, message) => o.failLate(requestId, "grammar_error", message),
      ...(o.workerUrl ? [o.workerUrl] : []),
    );
    const stopIds = [...new Set([...state.eosTokenIds, ...state.sampling.stopTokenIds])];
    this.numCompiling++;
    void this.client.compile(state.requestId, spec, stopIds).then((result) => {
      this.numCompiling--;
      if (o.isLive(state)) {
        if (result.ok) { state.grammarStatus = "ready"; o.onCompiled?.(state.requestId, result.compileMs, result.cached); }
        else o.failLate(state.requestId, "invalid_grammar", result.message);
      }
      const settled = this.settled;
      this.settled = null;
      settled?.();
      o.onWake?.();
    });
  }

  /** Resolves when a grammar compile settles (immediately when none is in flight). */
  waitForCompiles(): Promise<void> {
    if (this.numCompiling === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.settled;
      this.settled = () => { previous?.(); resolve(); };
    });
  }

  /**
   * The step's grammar requests: those that sample this step, each from its first constrained position (a
   * reasoning-gated grammar is neither filled nor advanced before the reasoning ends: vLLM should_fill_bitmask).
   */
  plan(chunks: readonly ScheduledChunk[]): { from: Map<string, number>; fillRequests: FillRequest[] } {
    const from = new Map<string, number>();
    const fillRequests: FillRequest[] = [];
    for (const c of chunks) {
      if (c.startPos + c.numNewTokens < c.request.numTokens) continue; // a prefill chunk that does not sample
      const start = grammarStart(c.request, c.draftTokenIds);
      if (start === null) continue;
      from.set(c.request.requestId, start);
      fillRequests.push({ requestId: c.request.requestId, drafts: c.draftTokenIds.slice(start) });
    }
    return { from, fillRequests };
  }

  /** Fills the planned bitmasks (one per draft position and one after the drafts) on the grammar thread; null: none. */
  fill(fillRequests: readonly FillRequest[]): Promise<FillResult> | null {
    return fillRequests.length > 0 ? this.client!.fill(fillRequests) : null;
  }

  /**
   * The request's bitmask at each verified position and how many of its scheduled drafts stay (the grammar's valid
   * prefix, cut where a later position would leave no token), or false when it cannot go on (the request is failed):
   * the grammar refused a token it had allowed (vLLM: "Unexpected: grammar rejected tokens ... Terminating request."),
   * or no token of the vocabulary can continue it. Null when the step does not constrain the request.
   */
  masks(req: RequestState, step: StepGrammar, numScheduledDrafts: number): DraftMasks | false | null {
    const row = step.row.get(req.requestId);
    const from = step.from.get(req.requestId) ?? null;
    const fill = step.fill;
    if (row === undefined || !fill || from === null) return null;
    const status = fill.status[row]!;
    if (status.kind === "rejected") {
      this.options!.failLate(req.requestId, "grammar_rejected", grammarRejectedMessage(status.tokenId, req.requestId));
      return false;
    }
    let numDrafts = Math.min(numScheduledDrafts, from + status.numValidDrafts);
    const masks: (Int32Array | undefined)[] = new Array(from).fill(undefined);
    for (let j = from; j <= numDrafts; j++) {
      const start = (fill.rowStart[row]! + j - from) * fill.words;
      const mask = fill.masks.subarray(start, start + fill.words);
      let any = false;
      for (let w = 0; w < mask.length && !any; w++) any = mask[w] !== 0;
      if (!any && j === 0) {
        this.options!.failLate(req.requestId, "grammar_dead_end", `structured output: no token of this model's vocabulary can continue the grammar after ${req.numOutputTokens} generated tokens`);
        return false;
      }
      // a draft that leads the grammar where no token can follow is never verified: the position before it is the last
      if (!any) { numDrafts = j - 1; break; }
      masks.push(mask);
    }
    return { masks: masks.slice(0, numDrafts + 1), numDrafts };
  }

  /**
   * An emitted token (the `index`-th of the request this step): the grammar accepts it from its first constrained
   * position on; before that, a reasoning end token switches the grammar on for the next one (vLLM should_advance: the
   * grammar starts on the token after the reasoning end token, which it never sees).
   */
  advance(req: RequestState, from: number | null, index: number, tokenId: number): void {
    if (from !== null && index >= from) this.client!.accept(req.requestId, tokenId);
    else if (!req.reasoningEnded && req.sampling.structuredOutputs!.reasoningEndTokenIds!.includes(tokenId)) req.reasoningEnded = true;
  }

  /**
   * Structured requests keep only the drafts their grammar accepts (vLLM Scheduler.update_draft_token_ids ->
   * validate_tokens), so the next step neither computes nor counts drafts that could never be emitted. A reasoning-gated
   * grammar validates only the drafts after a drafted reasoning end token.
   */
  async validateDrafts(requests: readonly RequestState[]): Promise<void> {
    const checks: { req: RequestState; from: number }[] = [];
    for (const req of requests) {
      if (req.grammarStatus !== "ready" || req.draftTokenIds.length === 0 || !this.options!.isLive(req)) continue;
      const from = grammarStart(req, req.draftTokenIds);
      if (from !== null && from < req.draftTokenIds.length) checks.push({ req, from });
    }
    if (checks.length === 0) return;
    const status = await this.client!.validateDrafts(checks.map(({ req, from }) => ({ requestId: req.requestId, drafts: req.draftTokenIds.slice(from) })));
    checks.forEach(({ req, from }, i) => {
      const s = status[i]!;
      if (s.kind === "rejected") this.options!.failLate(req.requestId, "grammar_rejected", grammarRejectedMessage(s.tokenId, req.requestId));
      else req.draftTokenIds = req.draftTokenIds.slice(0, from + s.numValidDrafts);
    });
  }

  /** Drops the requests' grammars (finished, aborted or failed); nothing when no grammar thread was started. */
  free(requestIds: readonly string[]): void {
    this.client?.free(requestIds);
  }

  /** Ends the grammar thread. */
  dispose(): void {
    this.client?.dispose();
    this.client = null;
  }
}
