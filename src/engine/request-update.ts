/**
 * The per-request update after a forward pass (vLLM Scheduler.update_from_output, vllm/v1/core/sched/scheduler.py):
 * each scheduled request's computed positions advance, its prompt logprobs are recorded, then it samples its next token
 * or verifies its drafts (rejection sampling), each emitted token is checked for a stop (check_stop), its full blocks
 * enter the prefix cache, and its delta and the step's counts are written. A pooling request's chunk goes to its
 * pooler instead. The engine core (engine-core.ts) calls this once per scheduled chunk, in batch order.
 */
import type { BatchLogits, ModelBatch, ModelRunner } from "../model/model-batch.ts";
import type { KvHandoff, PositionLogprobs, RequestDelta } from "./protocol.ts";
import type { FinishReason, SpecDecodingStats } from "./stats.ts";
import type { KvCacheManager } from "./kv-cache-manager.ts";
import type { RequestState } from "./request.ts";
import type { ScheduledChunk } from "./scheduler.ts";
import { positionLogprobs, type Sampler } from "./sampler.ts";
import { verifyDrafts } from "./spec-decode/rejection-sampler.ts";
import { embeddingOf } from "./pooler.ts";
import type { GrammarBookkeeping, StepGrammar } from "./grammar-bookkeeping.ts";

/** Why a request stopped; `stopReason` is the stop token id when one of `stop_token_ids` ended it (vLLM stop_reason). */
export interface StopDecision {
  readonly reason: FinishReason;
  readonly stopReason: number | null;
}

type MutableSpecStats = { -readonly [K in keyof SpecDecodingStats]: SpecDecodingStats[K] } & { numAcceptedTokensPerPos: number[] };

/** What one step's update adds up over its requests (vLLM EngineCoreOutputs and the step's SchedulerStats counts). */
export interface StepTally {
  readonly deltas: RequestDelta[];
  numPromptTokens: number;
  numGenerationTokens: number;
  numExternalKvTokens: number;
  /** speculative decoding's counts; null when it is off */
  readonly specStats: MutableSpecStats | null;
  /** requests that sampled this step and go on: the proposer drafts their next tokens */
  readonly toDraft: RequestState[];
}

/** An empty tally; `spec` null: speculative decoding is off. */
export function newStepTally(spec: { readonly numSpeculativeTokens: number } | null): StepTally {
  return {
    deltas: [], numPromptTokens: 0, numGenerationTokens: 0, numExternalKvTokens: 0, toDraft: [],
    specStats: spec !== null
      ? { numDrafts: 0, numDraftTokens: 0, numAcceptedTokens: 0, numAcceptedTokensPerPos: new Array<number>(spec.numSpeculativeTokens).fill(0) }
      : null,
  };
}

/** The forward pass's output for the step, as the update reads it. */
export interface StepModelOutput {
  readonly batch: ModelBatch;
  readonly result: BatchLogits;
  readonly grammar: StepGrammar;
  /** pooling engines: the first hidden-state row of each chunk ([numTokens, dim] in batch order) */
  readonly tokenRowStart: readonly number[];
  readonly vocabSize: number;
  readonly stepEndMs: number;
}

/** The engine parts the update works on. */
export interface RequestUpdateContext {
  readonly kv: KvCacheManager;
  readonly sampler: Sampler;
  readonly grammar: GrammarBookkeeping;
  readonly maxModelLen: number;
  /** speculative decoding is on: requests that go on are drafted for */
  readonly drafting: boolean;
  /** the model runner: its own head after pooling (gemma-embedding's dense projections) */
  readonly runner: Pick<ModelRunner, "projectPooled">;
  /** a finishing request's hand-off for the next stage (its prompt's KV), when it asked for one */
  exportKv(req: RequestState): KvHandoff;
  /** a finishing request's kv_transfer_params from the connector between instances; absent without one */
  peerFinished?(req: RequestState, reason: FinishReason): Readonly<Record<string, unknown>> | null;
  /** a finished request leaves the engine and the scheduler (its blocks are freed) */
  retire(req: RequestState): void;
  /** a finished generating request's grammar and drafter state are dropped too */
  forget(req: RequestState): void;
}

/** Stop conditions checked in the engine (stop strings are the output processor's, on the main thread; vLLM check_stop). */
export function checkStop(req: RequestState, tokenId: number, maxModelLen: number): StopDecision | null {
  const p = req.sampling;
  if (req.numOutputTokens >= p.minTokens) {
    if (!p.ignoreEos && req.eosTokenIds.includes(tokenId)) return { reason: "stop", stopReason: null };
    if (p.stopTokenIds.includes(tokenId)) return { reason: "stop", stopReason: tokenId };
  }
  if (req.numOutputTokens >= req.maxOutputTokens) return { reason: "length", stopReason: null };
  if (req.numTokens >= maxModelLen) return { reason: "length", stopReason: null };
  return null;
}

/** A chunk computed with every row ("all"): the logprobs of each prompt position after its first (vLLM prompt_logprobs). */
function recordPromptLogprobs(req: RequestState, chunk: ScheduledChunk, rowOf: (r: number) => Float32Array, rowStart: number): void {
  for (let j = 0; j < chunk.numNewTokens; j++) {
    const next = chunk.startPos + j + 1;
    if (next < req.numPromptTokens) req.promptLogprobs![next] = positionLogprobs(rowOf(rowStart + j), req.allTokenIds[next]!, req.sampling.promptLogprobs!);
  }
}

/**
 * Updates one scheduled request from the step's output (vLLM update_from_output's loop body).
 * @param i the chunk's index in the batch
 */
export function updateRequest(ctx: RequestUpdateContext, chunk: ScheduledChunk, i: number, out: StepModelOutput, tally: StepTally): void {
  const req = chunk.request;
  if (req.status === "finished") return; // aborted while the step ran
  const numScheduledDrafts = chunk.draftTokenIds.length;
  // positions of real tokens end here; drafted positions count as computed only once accepted
  const end = chunk.startPos + chunk.numNewTokens - numScheduledDrafts;
  req.numComputedTokens = end;
  if (req.numPreemptions === 0) tally.numPromptTokens += Math.max(0, Math.min(end, req.numPromptTokens) - chunk.startPos);
  if (req.pooler !== null) {
    poolChunk(ctx, req, chunk, out.result.hidden, out.tokenRowStart[i]!, end, out.stepEndMs, tally.deltas);
    return;
  }
  const rowStart = out.result.rowStart[i]!;
  const wanted = out.batch.sequences[i]!.logits;
  const vocabSize = out.vocabSize;
  const rowOf = (r: number): Float32Array => out.result.logits.subarray(r * vocabSize, (r + 1) * vocabSize);
  if (wanted === "all" && req.promptLogprobs) recordPromptLogprobs(req, chunk, rowOf, rowStart);
  if (end < req.numTokens) { // a prefill chunk that is not the last
    ctx.kv.cacheFullBlocks(req);
    return;
  }
  const masks = ctx.grammar.masks(req, out.grammar, chunk.draftTokenIds.length);
  if (masks === false) { // failed: reported with the step's late errors
    ctx.kv.cacheFullBlocks(req);
    return;
  }
  const from = out.grammar.from.get(req.requestId) ?? null;
  // drafts the grammar refuses (or that lead it to a dead end) are cut before verification (vLLM: -1, always rejected)
  const numDrafts = masks === null ? numScheduledDrafts : masks.numDrafts;
  const sampleCtx = {
    params: req.sampling, allTokenIds: req.allTokenIds, numPromptTokens: req.numPromptTokens, outputCounts: req.outputCounts,
    stopTokenIds: req.sampling.ignoreEos ? req.sampling.stopTokenIds : [...req.eosTokenIds, ...req.sampling.stopTokenIds], rng: req.rng,
  };
  const newTokenIds: number[] = [];
  const newLogprobs: PositionLogprobs[] = [];
  let finish: StopDecision | null = null;
  // each token joins the context before the next position is sampled; a stop drops the rest (vLLM check_stop)
  const push = (tokenId: number, logprobs: PositionLogprobs | undefined): boolean => {
    ctx.grammar.advance(req, from, newTokenIds.length, tokenId);
    req.appendOutput(tokenId);
    newTokenIds.push(tokenId);
    if (logprobs) newLogprobs.push(logprobs);
    finish = checkStop(req, tokenId, ctx.maxModelLen);
    return finish !== null;
  };
  const lastRow = wanted === "all" ? rowStart + chunk.numNewTokens - 1 - numScheduledDrafts : rowStart;
  if (numDrafts === 0) {
    const tokenBitmask = masks?.masks[0];
    const { tokenId, logprobs } = ctx.sampler.sample(rowOf(lastRow), tokenBitmask ? { ...sampleCtx, tokenBitmask } : sampleCtx);
    push(tokenId, logprobs);
  } else {
    const rows = Array.from({ length: numDrafts + 1 }, (_, j) => rowOf(lastRow + j)); // [numDrafts + 1][vocabSize]
    const drafts = chunk.draftTokenIds.slice(0, numDrafts);
    const { numAccepted, numEmitted } = verifyDrafts(rows, drafts, sampleCtx, ctx.sampler, push, masks ? { bitmasks: masks.masks } : {});
    req.numComputedTokens += numEmitted;
    const specStats = tally.specStats;
    if (specStats !== null) {
      specStats.numDrafts++;
      specStats.numDraftTokens += numDrafts;
      specStats.numAcceptedTokens += numAccepted;
      for (let j = 0; j < numAccepted; j++) specStats.numAcceptedTokensPerPos[j]!++;
    }
  }
  ctx.kv.cacheFullBlocks(req);
  tally.numGenerationTokens += newTokenIds.length;
  if (req.times.firstTokenMs === null && newTokenIds.length > 0) tally.numExternalKvTokens += req.numImportedTokens;
  req.times.firstTokenMs ??= out.stepEndMs;
  req.times.lastTokenMs = out.stepEndMs;
  const finished = finish as StopDecision | null;
  tally.deltas.push(outputDelta(ctx, req, newTokenIds, newLogprobs, finished));
  if (finished) {
    ctx.retire(req);
    ctx.forget(req);
  } else if (ctx.drafting) {
    tally.toDraft.push(req);
  }
}

/** The request's delta for this step (vLLM EngineCoreOutput): new tokens, prompt logprobs once, the finish and hand-offs. */
function outputDelta(ctx: RequestUpdateContext, req: RequestState, newTokenIds: number[], newLogprobs: PositionLogprobs[], finished: StopDecision | null): RequestDelta {
  let promptLogprobs: readonly (PositionLogprobs | null)[] | undefined;
  if (req.promptLogprobs && !req.promptLogprobsSent) {
    promptLogprobs = req.promptLogprobs;
    req.promptLogprobsSent = true;
  }
  return {
    requestId: req.requestId, newTokenIds, ...(newLogprobs.length > 0 ? { logprobs: newLogprobs } : {}),
    ...(promptLogprobs ? { promptLogprobs } : {}),
    ...(finished ? { finishReason: finished.reason, stopReason: finished.stopReason } : {}),
    numCachedTokens: req.numCachedTokens, times: req.snapshotTimes(),
    ...(finished && req.exportKv ? { kv: ctx.exportKv(req) } : {}),
    ...(finished && ctx.peerFinished ? { kvTransferParams: ctx.peerFinished(req, finished.reason) } : {}),
  };
}

/**
 * A pooling request's chunk (vLLM: a pooling request is a prefill whose output is the pooled hidden state): its rows
 * go into the request's pooler; once the whole prompt is in, the embedding is its delta, the request finishes and its
 * KV blocks are freed (nothing is decoded after it).
 */
function poolChunk(ctx: RequestUpdateContext, req: RequestState, chunk: ScheduledChunk, hidden: Float32Array | undefined, tokenRow: number, end: number, stepEndMs: number, deltas: RequestDelta[]): void {
  const pooler = req.pooler!;
  if (hidden === undefined) throw new Error("engine: the model runner returned no hidden states for a pooling batch");
  const dim = pooler.dim;
  pooler.add(hidden.subarray(tokenRow * dim, (tokenRow + chunk.numNewTokens) * dim), chunk.startPos);
  ctx.kv.cacheFullBlocks(req);
  if (end < req.numTokens) return;
  const params = req.pooling!;
  const pooled = pooler.pooled();
  // the model's own head after pooling (gemma-embedding's dense projections), before matryoshka and normalisation
  const embedding = embeddingOf(ctx.runner.projectPooled?.(pooled) ?? pooled, params.dimensions, params.normalize);
  req.times.firstTokenMs ??= stepEndMs;
  req.times.lastTokenMs = stepEndMs;
  deltas.push({
    requestId: req.requestId, newTokenIds: [], finishReason: "stop", stopReason: null, numCachedTokens: req.numCachedTokens,
    times: req.snapshotTimes(), embedding,
  });
  ctx.retire(req);
}
