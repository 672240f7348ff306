/**
 * Test double for one stage: an Orchestrator over a tiny deterministic "model" (greedy next token = a hash of the
 * whole sequence so far, EOS = token 0), with real KV export/import semantics: the exported KV encodes the prompt
 * positions, and an import that does not match the new prompt's prefix fails the request. It reports step stats
 * (TTFT on the first token, ITL after, imported KV positions with the first) to its listener like the engine and its
 * front end do.
 */
import type { StatsListener } from "../../src/frontend/iteration-stats.ts";
import type { GenerateRequest, Orchestrator, RequestOutput } from "../../src/frontend/orchestrator.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

export const VOCAB = 64;
const EOS = 0;

/** the toy model: deterministic in the whole sequence, so a KV handoff that lost a position changes the output */
export function nextToken(seq: readonly number[], salt: number): number {
  let h = 2166136261 ^ salt;
  for (const t of seq) h = Math.imul(h ^ t, 16777619) >>> 0;
  return (h % (VOCAB - 1)) + 1;
}

const CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .";

export const fakeTokenizer = {
  vocabSize: VOCAB, bosId: null, eosId: EOS, stopIds: [EOS],
  encode: (text: string) => [...text].map((c) => Math.max(1, CHARS.indexOf(c) + 1) % VOCAB || 1),
  decode: (ids: readonly number[]) => ids.map((t) => CHARS[t - 1] ?? "").join(""),
  tokenText: (t: number) => CHARS[t - 1] ?? "",
  isSpecial: (t: number) => t === EOS,
} as unknown as Tokenizer;

const CONFIG = { architecture: "llama", name: "fake", vocabSize: VOCAB, dim: 8, hiddenDim: 16, numLayers: 1, numHeads: 1, numKvHeads: 1, headDim: 8, ropeDim: 8, ropeFreqBase: 1e4, ropeNeox: false, rmsEps: 1e-5, contextLength: 256, tiedEmbeddings: true, hasQkvBias: false, hasQkNorm: false } as const satisfies ModelConfig;

export interface FakeStageOptions {
  readonly engineIndex: number;
  readonly listener: StatsListener | null;
  /** a different "model" per salt (text stages may use another model) */
  readonly salt?: number;
  /** tokens after which the model says EOS (to test early stops) */
  readonly eosAfter?: number;
  readonly stepDelayMs?: number;
  /** false: an engine without KV export (the pipeline falls back to sending token ids) */
  readonly exportsKv?: boolean;
}

export function fakeStage(options: FakeStageOptions): Orchestrator & { readonly requests: GenerateRequest[] } {
  const requests: GenerateRequest[] = [];
  const salt = options.salt ?? 1;
  return {
    requests,
    modelConfig: CONFIG, maxModelLen: 256, tokenizer: fakeTokenizer,
    isHealthy: () => true,
    shutdown: async () => {},
    async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
      requests.push(request);
      const queuedMs = performance.timeOrigin + performance.now();
      const seq = [...request.promptTokenIds];
      if (request.importKv) {
        const imported = [...request.importKv.data];
        const expected = request.promptTokenIds.slice(0, request.importKv.numTokens);
        if (JSON.stringify(imported) !== JSON.stringify(expected)) throw new Error("imported KV does not match the prompt prefix");
      }
      const maxTokens = request.sampling.maxTokens ?? 256 - seq.length;
      let first: number | null = null;
      let lastMs: number | null = null;
      for (let n = 1; n <= maxTokens; n++) {
        if (signal?.aborted) return;
        await Bun.sleep(options.stepDelayMs ?? 1);
        const nowMs = performance.timeOrigin + performance.now();
        const token = options.eosAfter !== undefined && n > options.eosAfter ? EOS : nextToken(seq, salt);
        seq.push(token);
        options.listener?.onStep({
          engineIndex: options.engineIndex, batchId: n, stepStartMs: nowMs, stepEndMs: nowMs, batchSize: 1,
          numPromptTokens: n === 1 ? request.promptTokenIds.length - (request.importKv?.numTokens ?? 0) : 0, numGenerationTokens: 1,
          numPreempted: 0, numRunning: 1, numWaiting: 0, kvCacheUsage: 0.1, prefixCacheQueries: 0, prefixCacheHits: 0,
          timeToFirstTokensS: n === 1 ? [(nowMs - request.arrivalMs) / 1000] : [], interTokenLatenciesS: n > 1 && lastMs !== null ? [(nowMs - lastMs) / 1000] : [],
          // the engine counts imported KV positions in the step of the request's first output
          ...(n === 1 && request.importKv ? { numExternalKvTokens: request.importKv.numTokens } : {}),
        });
        first ??= nowMs;
        lastMs = nowMs;
        const finishReason = token === EOS ? "stop" : n === maxTokens ? "length" : null;
        const finished = finishReason !== null;
        yield {
          requestId: request.requestId,
          outputs: [{ index: 0, textDelta: fakeTokenizer.decode([token]), tokenIdsDelta: [token], numGeneratedTokens: n, finishReason, stopReason: null }],
          numPromptTokens: request.promptTokenIds.length, numCachedTokens: 0, finished,
          times: { arrivalMs: request.arrivalMs, queuedMs, scheduledMs: queuedMs, firstTokenMs: first, lastTokenMs: nowMs },
          ...(finished && request.exportKv && options.exportsKv !== false ? { kv: { numTokens: request.promptTokenIds.length, blockSize: 16, data: Uint8Array.from(request.promptTokenIds) } } : {}),
        };
        if (finished) return;
      }
    },
  };
}
