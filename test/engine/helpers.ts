/** Shared helpers for engine tests: build requests, run an EngineCore to completion, collect outputs. */
import { EngineCore } from "../../src/engine/engine-core.ts";
import type { EngineConfig } from "../../src/engine/engine-sizing.ts";
import type { EngineRequest, PositionLogprobs, RequestDelta } from "../../src/engine/protocol.ts";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../../src/engine/sampling-params.ts";
import type { FinishReason, StepStats } from "../../src/engine/stats.ts";
import { FakeRunner, type FakeRunnerOptions } from "./fake-runner.ts";

export const GREEDY: SamplingParams = { ...DEFAULT_SAMPLING_PARAMS, temperature: 0, maxTokens: 16 };

export function engineConfig(overrides: Partial<EngineConfig> = {}): EngineConfig {
  return { maxNumSeqs: 16, maxNumBatchedTokens: 64, maxModelLen: 512, blockSize: 16, numBlocks: 256, enablePrefixCaching: true, ...overrides };
}

export function makeEngine(config: Partial<EngineConfig> = {}, runnerOptions: FakeRunnerOptions = {}): { engine: EngineCore; runner: FakeRunner } {
  const runner = new FakeRunner(runnerOptions);
  return { engine: new EngineCore(runner, engineConfig(config), 0, () => performance.now(), 1234), runner };
}

/** deterministic pseudo-random prompt of `length` token ids in [3, vocabSize) */
export function prompt(length: number, seed: number, vocabSize = 97): number[] {
  const ids: number[] = [];
  let s = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    s ^= s << 13; s ^= s >>> 17; s ^= s << 5;
    ids.push(3 + ((s >>> 0) % (vocabSize - 3)));
  }
  return ids;
}

export function request(requestId: string, promptTokenIds: number[], sampling: Partial<SamplingParams> = {}, eosTokenIds?: number[]): EngineRequest {
  return { requestId, promptTokenIds, sampling: { ...GREEDY, ...sampling }, arrivalMs: performance.now(), ...(eosTokenIds ? { eosTokenIds } : {}) };
}

export interface Collected {
  tokens: number[];
  finishReason: FinishReason | null;
  stopReason: number | null;
  numCachedTokens: number;
  logprobs: PositionLogprobs[];
  promptLogprobs: readonly (PositionLogprobs | null)[] | null;
  deltas: RequestDelta[];
}

/** Steps the engine until it has no work (or maxSteps), gathering each request's outputs and every step's stats. */
export async function runToCompletion(engine: EngineCore, maxSteps = 100_000): Promise<{ outputs: Map<string, Collected>; steps: StepStats[]; errors: Map<string, string> }> {
  const outputs = new Map<string, Collected>();
  const steps: StepStats[] = [];
  const errors = new Map<string, string>();
  const takeErrors = (): void => { for (const e of engine.takeLateErrors()) errors.set(e.requestId, `${e.code}: ${e.message}`); };
  for (let i = 0; i < maxSteps && engine.hasWork(); i++) {
    const r = await engine.step();
    takeErrors();
    if (!r && engine.numCompilingGrammars > 0) { await engine.waitForGrammar(); takeErrors(); continue; }
    if (!r) throw new Error("engine has work but scheduled nothing");
    steps.push(r.stats);
    collect(outputs, r.deltas);
  }
  takeErrors();
  if (engine.hasWork()) throw new Error(`engine still busy after ${maxSteps} steps`);
  return { outputs, steps, errors };
}

export function collect(outputs: Map<string, Collected>, deltas: readonly RequestDelta[]): void {
  for (const d of deltas) {
    let c = outputs.get(d.requestId);
    if (!c) {
      c = { tokens: [], finishReason: null, stopReason: null, numCachedTokens: 0, logprobs: [], promptLogprobs: null, deltas: [] };
      outputs.set(d.requestId, c);
    }
    c.tokens.push(...d.newTokenIds);
    c.deltas.push(d);
    c.numCachedTokens = d.numCachedTokens;
    if (d.logprobs) c.logprobs.push(...d.logprobs);
    if (d.promptLogprobs) c.promptLogprobs = d.promptLogprobs;
    if (d.finishReason) { c.finishReason = d.finishReason; c.stopReason = d.stopReason ?? null; }
  }
}

/** Runs one request alone on a fresh engine; returns its generated tokens. */
export async function runAlone(req: EngineRequest, config: Partial<EngineConfig> = {}, runnerOptions: FakeRunnerOptions = {}): Promise<Collected> {
  const { engine } = makeEngine(config, runnerOptions);
  const e = engine.addRequest(req);
  if (e) throw new Error(e.message);
  const { outputs } = await runToCompletion(engine);
  return outputs.get(req.requestId)!;
}
