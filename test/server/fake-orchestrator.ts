/**
 * A fake Orchestrator for HTTP-layer tests: a one-character-per-token tokenizer and a generator that writes a fixed
 * story one token per step, honouring n, seed, max_tokens, stop strings, stop token ids, logprobs and abort. It records
 * what it was asked and what got aborted, so tests can check the server's side of the contract.
 */
import type { PositionLogprobs } from "../../src/engine/protocol.ts";
import type { GenerateRequest, Orchestrator, RequestOutput } from "../../src/frontend/orchestrator.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import type { ChatMessage, Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { nowMs } from "../../src/util/clock.ts";
import { ChatTemplate, contentText } from "../../src/tokenizer/chat-template.ts";

const BOS = 1;
const EOS = 2;
/** ids 3..130 are ASCII 0..127 */
const OFFSET = 3;
const STORY = "Once upon a time there was a little fox. It liked to run in the sun. ";

/** `chatTemplate`: a real Jinja template for the fake's chats (else its plain "role: content" lines). */
export function createFakeTokenizer(chatTemplate: string | null = null): Tokenizer {
  const templates = new ChatTemplate(chatTemplate, { bosToken: "<s>", eosToken: "</s>" }, "fake.gguf");
  const tokenText = (id: number) => (id === BOS ? "<s>" : id === EOS ? "</s>" : String.fromCharCode(id - OFFSET));
  const decode = (ids: readonly number[], options?: { skipSpecialTokens: boolean }) =>
    ids.filter((id) => !(options?.skipSpecialTokens && (id === BOS || id === EOS))).map(tokenText).join("");
  return {
    vocabSize: 131, bosId: BOS, eosId: EOS, stopIds: [EOS],
    encode: (text, options) => [...(options.addSpecial ? [BOS] : []), ...[...text].map((c) => Math.min(c.charCodeAt(0), 127) + OFFSET)],
    decode,
    tokenText,
    isSpecial: (id) => id === BOS || id === EOS,
    createDetokenizer: (options) => ({ push: (ids) => decode(ids, options), flush: () => "" }),
    // present so grammar requests are accepted; the fake records them (request.sampling.structuredOutputs), never runs them
    grammarVocabulary: () => ({ encodedVocab: Array.from({ length: 131 }, (_, id) => tokenText(id)), vocabType: "byte_level", prependSpace: false }),
    applyChatTemplate: (messages: readonly ChatMessage[], options) =>
      chatTemplate !== null || (options.template ?? null) !== null || options.continueFinalMessage === true
        ? templates.apply(messages, options)
        : messages.map((m) => `${m.role}: ${contentText(m.content)}\n`).join("") + (options.addGenerationPrompt ? "assistant:" : ""),
  };
}

export interface FakeOrchestrator extends Orchestrator {
  readonly requests: GenerateRequest[];
  readonly abortedIds: string[];
  running(): number;
  setHealthy(healthy: boolean): void;
}

export interface FakeOptions {
  readonly stepDelayMs?: number;
  readonly maxModelLen?: number;
  /** finish every request with finish reason "error" after this many tokens */
  readonly failAfterTokens?: number;
  /** the text every request generates instead of the looping story, then EOS (finish reason "stop") */
  readonly script?: string;
  /** a real chat template for the fake tokenizer */
  readonly chatTemplate?: string;
  /** prompt tokens each request reports as cached (prefix-cache hits); default 0 */
  readonly cachedTokens?: number;
}

const MODEL_CONFIG: ModelConfig = {
  architecture: "llama", name: "fake", vocabSize: 131, dim: 8, hiddenDim: 16, numLayers: 1, numHeads: 1, numKvHeads: 1,
  headDim: 8, ropeDim: 8, ropeFreqBase: 10000, ropeNeox: false, rmsEps: 1e-5, contextLength: 256, tiedEmbeddings: true,
  hasQkvBias: false, hasQkNorm: false,
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function createFakeOrchestrator(fake: FakeOptions = {}): FakeOrchestrator {
  const tokenizer = createFakeTokenizer(fake.chatTemplate ?? null);
  const requests: GenerateRequest[] = [];
  const abortedIds: string[] = [];
  let numRunning = 0;
  let healthy = true;
  const stepDelayMs = fake.stepDelayMs ?? 1;

  async function* generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    requests.push(request);
    numRunning++;
    const s = request.sampling;
    const queuedMs = nowMs();
    await sleep(stepDelayMs);
    const scheduledMs = nowMs();
    let firstTokenMs: number | null = null;
    let lastTokenMs: number | null = null;
    const texts = Array.from({ length: s.n }, () => "");
    const held = Array.from({ length: s.n }, () => "");
    const counts = Array.from({ length: s.n }, () => 0);
    const done = Array.from({ length: s.n }, () => false);
    const maxTokens = s.maxTokens ?? 16;
    try {
      for (let step = 0; done.some((d) => !d); step++) {
        await sleep(stepDelayMs);
        if (signal?.aborted) return;
        const t = nowMs();
        firstTokenMs ??= t;
        lastTokenMs = t;
        const outputs = [];
        for (let i = 0; i < s.n; i++) {
          if (done[i]) continue;
          const start = fake.script !== undefined ? 0 : ((s.seed ?? 0) + i * 7) % STORY.length;
          const story = fake.script ?? STORY;
          const ch = story[(start + step) % story.length]!;
          const tokenId = ch.charCodeAt(0) + OFFSET;
          counts[i]!++;
          let finishReason: "stop" | "length" | "error" | null = null;
          let stopReason: string | number | null = null;
          // like the real output processor, hold back text that may be the start of a stop string
          const full = texts[i]! + held[i]! + (s.stopTokenIds.includes(tokenId) ? "" : ch);
          if (s.stopTokenIds.includes(tokenId)) { finishReason = "stop"; stopReason = tokenId; }
          const stop = s.stop.find((x) => full.includes(x));
          let visibleEnd = full.length;
          if (stop !== undefined) {
            visibleEnd = full.indexOf(stop) + (s.includeStopStrInOutput ? stop.length : 0);
            finishReason = "stop";
            stopReason = stop;
          } else {
            if (finishReason === null && fake.script !== undefined && step === fake.script.length - 1) { finishReason = "stop"; stopReason = null; }
            if (finishReason === null && counts[i]! >= maxTokens) finishReason = "length";
            if (fake.failAfterTokens !== undefined && counts[i]! >= fake.failAfterTokens) finishReason = "error";
            if (finishReason === null) {
              for (let k = Math.min(full.length, Math.max(0, ...s.stop.map((x) => x.length - 1))); k > 0; k--) {
                if (s.stop.some((x) => x.startsWith(full.slice(full.length - k)))) { visibleEnd = full.length - k; break; }
              }
            }
          }
          const textDelta = full.slice(texts[i]!.length, visibleEnd);
          held[i] = full.slice(visibleEnd);
          texts[i] += textDelta;
          if (finishReason !== null) done[i] = true;
          const logprobsDelta: PositionLogprobs[] | undefined = s.logprobs === null ? undefined : [{
            chosen: { tokenId, logprob: -0.25, rank: 1 },
            top: Array.from({ length: s.logprobs }, (_, k) => ({ tokenId: k === 0 ? tokenId : OFFSET + 65 + k, logprob: -0.25 - k, rank: k + 1 })),
          }];
          outputs.push({ index: i, textDelta, tokenIdsDelta: [tokenId], logprobsDelta, numGeneratedTokens: counts[i]!, finishReason, stopReason });
        }
        const promptLogprobs = step === 0 && s.promptLogprobs !== null
          ? request.promptTokenIds.map((id, k) => (k === 0 ? null : { chosen: { tokenId: id, logprob: -1.5, rank: 3 }, top: Array.from({ length: s.promptLogprobs! }, (_, j) => ({ tokenId: OFFSET + 97 + j, logprob: -0.5 - j, rank: j + 1 })) }))
          : undefined;
        yield {
          ...(promptLogprobs ? { promptLogprobs } : {}),
          requestId: request.requestId, outputs, numPromptTokens: request.promptTokenIds.length, numCachedTokens: fake.cachedTokens ?? 0,
          finished: done.every((d) => d), times: { arrivalMs: request.arrivalMs, queuedMs, scheduledMs, firstTokenMs, lastTokenMs },
        };
      }
    } finally {
      if (signal?.aborted) abortedIds.push(request.requestId);
      numRunning--;
    }
  }

  return {
    modelConfig: MODEL_CONFIG,
    maxModelLen: fake.maxModelLen ?? 256,
    tokenizer,
    generate,
    isHealthy: () => healthy,
    shutdown: async () => {},
    requests, abortedIds,
    running: () => numRunning,
    setHealthy: (h) => { healthy = h; },
  };
}
