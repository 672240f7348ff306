/**
 * One engine with the pipeline's bookkeeping around it, for `--pipeline single --log-stats` (vLLM-Omni prints its
 * tables for a one-stage pipeline too): every output passes through untouched (n > 1 included), and the request gets
 * its stage-0 record, its tables and one FinishedRequestStats as a whole, like a request of a longer chain. Without
 * --log-stats the server talks to the engine's front end directly (serving-pipeline.ts).
 * @example const orchestrator = new SingleStage(spec, frontend, { tables: onlineTables(1, write) });
 */
import type { EncodeOutput, EncodeRequest, GenerateRequest, Orchestrator, RequestOutput } from "../frontend/orchestrator.ts";
import type { ResolvedPooler } from "../engine/resolve-pooler.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { nowMs as clockNowMs } from "../util/clock.ts";
import { absorbOutput, emptyStageResult, finalizeTables, reportRun, stageFailed, startRun, type StagePipelineOptions } from "./request-run.ts";
import { stageSampling, type StageSpec } from "./stage-config.ts";

export class SingleStage implements Orchestrator {
  private readonly nowMs: () => number;
  /** requests finished so far (batch_id, the Mar-2026+ definition: 1-based finished count per stage) */
  private numFinished = 0;

  constructor(private readonly spec: StageSpec, private readonly stage: Orchestrator, private readonly options: StagePipelineOptions = {}) {
    this.nowMs = options.nowMs ?? clockNowMs;
  }

  get modelConfig(): ModelConfig { return this.stage.modelConfig; }
  get maxModelLen(): number { return this.stage.maxModelLen; }
  get tokenizer(): Tokenizer { return this.stage.tokenizer; }
  get numStages(): number { return 1; }
  isHealthy(): boolean { return this.stage.isHealthy(); }
  get pooler(): ResolvedPooler | null { return this.stage.pooler ?? null; }
  /** pooling requests pass straight to the engine (no stage tables: a pooling request has no stage output) */
  encode(request: EncodeRequest, signal?: AbortSignal): Promise<EncodeOutput> {
    if (this.stage.encode === undefined) return Promise.reject(new Error("this stage cannot pool"));
    return this.stage.encode(request, signal);
  }
  shutdown(): Promise<void> { return this.stage.shutdown(); }
  resetPrefixCache(resetRunningRequests: boolean): Promise<boolean> {
    return this.stage.resetPrefixCache?.(resetRunningRequests) ?? Promise.resolve(false);
  }
  loadLora(name: string, path: string, loraIntId: number): Promise<string | null> {
    return this.stage.loadLora?.(name, path, loraIntId) ?? Promise.resolve("this engine serves no LoRA adapters");
  }
  unloadLora(name: string): Promise<string | null> {
    return this.stage.unloadLora?.(name) ?? Promise.resolve("this engine serves no LoRA adapters");
  }

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    const run = startRun(request, this.options.tables ?? null, this.nowMs);
    try {
      const stageSubmitMs = this.nowMs();
      run.events?.onStageInput(0, stageSubmitMs);
      const stageRequest: GenerateRequest = {
        requestId: request.requestId, promptTokenIds: request.promptTokenIds, sampling: stageSampling(request.sampling, this.spec), arrivalMs: request.arrivalMs,
        ...(request.loraName !== undefined ? { loraName: request.loraName } : {}),
      };
      const result = emptyStageResult();
      for await (const out of this.stage.generate(stageRequest, signal)) {
        run.events?.onStageOutput(0, this.nowMs());
        absorbOutput(result, out);
        if (out.outputs.length > 0 && run.firstVisibleTokenMs === null) run.firstVisibleTokenMs = out.times.firstTokenMs;
        if (out.finished) { run.held = out; break; }
        yield out;
      }
      run.stage0 = result;
      run.last = result;
      run.stageStats.push({
        stageId: 0, numTokensIn: request.promptTokenIds.length, numTokensOut: result.tokenIds.length, batchId: ++this.numFinished,
        batchSize: 1, stageGenTimeMs: this.nowMs() - stageSubmitMs, postprocessTimeMs: 0,
      });
      const finalizeMs = this.nowMs();
      if (!stageFailed(result, signal)) finalizeTables(run, finalizeMs);
      reportRun(run, this.options.listener, result.tokenIds.length, finalizeMs, signal?.aborted ?? false);
      if (run.held) yield run.held;
    } finally {
      // the consumer went away (or the stage failed) before the end: count it in no finished-request metric
      if (!run.reported) reportRun(run, this.options.listener, run.last?.tokenIds.length ?? 0, this.nowMs(), true);
    }
  }
}
