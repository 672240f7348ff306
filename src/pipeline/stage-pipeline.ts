/**
 * A chain of stages behind the one Orchestrator interface the server and run-batch use (vLLM-Omni's orchestrator,
 * reference omni-stats-tables.md §3). Each stage is its own orchestrator (own engine, own model); edge i -> i+1 carries
 * either the prompt's KV blocks (stage i stops after the first token, stage i+1 continues the same sequence: the
 * disaggregated prefill/decode of `--pipeline pd`) or stage i's output text (the next stage's prompt).
 *
 * What the client sees: the output of the last "run" of stages linked by KV edges (for pd: the first token from
 * stage 0, then stage 1's tokens), so greedy pd output equals single-stage output.
 * What it records: per stage StageRequestStats, per edge TransferEdgeStats (tx / in-flight / rx-decode through an
 * EdgeChannel), per stage first-input / last-output times, and one FinishedRequestStats for the whole request.
 * Multi-stage chains take n = 1 only (a KV handoff continues exactly one sequence).
 */
import type { KvHandoff } from "../engine/protocol.ts";
import type { FinishReason, FinishedRequestStats, RequestTimes, StageRequestStats, StatsListener, StepStats, TransferEdgeStats } from "../engine/stats.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { nowMs as clockNowMs } from "../util/clock.ts";
import { EdgeChannel } from "./edge-channel.ts";
import { decodeKv, encodeKv } from "./kv-handoff.ts";
import { EngineRequestError, type CompletionOutput, type GenerateRequest, type Orchestrator, type RequestOutput } from "../frontend/orchestrator.ts";
import { stageSampling, type StageChain, type StageSpec } from "./stage-config.ts";
import type { PipelineStatsSink } from "./stage-stats.ts";
import { decodeText, encodeText } from "./text-handoff.ts";

/** Builds one stage's orchestrator; `listener` gets that stage's step stats (engine label = stage id). */
export type StageFactory = (stage: StageSpec, engineIndex: number, listener: StatsListener | null) => Promise<Orchestrator>;

export interface StagePipelineOptions {
  /** gets the pipeline's step stats (per stage) and one FinishedRequestStats per request */
  readonly listener?: StatsListener | null;
  readonly tables?: PipelineStatsSink | null;
  readonly nowMs?: () => number;
  /** one-line warnings (default: stderr) */
  readonly warn?: (line: string) => void;
}

export class PipelineRequestError extends Error {
  override readonly name = "PipelineRequestError";
}

/**
 * How a stage's step stats reach /metrics: the request's TTFT is stage 0's; a KV continuation's first token is an
 * inter-token gap of the same sequence, and the positions it imported count as external_kv_transfer prompt tokens in
 * the step of its first output (`importedTokens`: per request submitted with KV, in submission order); a text stage
 * starts a new generation whose TTFT is not the request's.
 */
function stageListener(listener: StatsListener, stage: StageSpec, importedTokens: number[]): StatsListener {
  const role = stage.stageId === 0 ? "first" : stage.input === "kv_blocks" ? "continuation" : "new-generation";
  return {
    onStep(stats: StepStats): void {
      if (role === "first") return listener.onStep(stats);
      if (role === "new-generation") return listener.onStep({ ...stats, engineIndex: stage.stageId, timeToFirstTokensS: [] });
      // FCFS: requests produce their first output in the order they were submitted
      const numExternalKvTokens = importedTokens.splice(0, stats.timeToFirstTokensS.length).reduce((a, b) => a + b, 0);
      const interTokenLatenciesS = [...stats.timeToFirstTokensS, ...stats.interTokenLatenciesS];
      listener.onStep({ ...stats, engineIndex: stage.stageId, timeToFirstTokensS: [], interTokenLatenciesS, numExternalKvTokens });
    },
    // the pipeline reports each request once, as a whole
    onRequestFinished(): void {},
  };
}

/** Builds every stage (shutting down the built ones if one fails) and the pipeline over them. */
export async function buildPipeline(chain: StageChain, factory: StageFactory, options: StagePipelineOptions = {}): Promise<StagePipeline> {
  const built: Orchestrator[] = [];
  const importedTokens: number[][] = chain.stages.map(() => []);
  try {
    for (const stage of chain.stages) {
      const listener = options.listener ? stageListener(options.listener, stage, importedTokens[stage.stageId]!) : null;
      built.push(await factory(stage, stage.stageId, listener));
    }
  } catch (e) {
    await Promise.all(built.map((o) => o.shutdown()));
    throw e;
  }
  return new StagePipeline(chain.stages.map((spec, i) => ({ spec, orchestrator: built[i]! })), options, importedTokens);
}

interface Stage {
  readonly spec: StageSpec;
  readonly orchestrator: Orchestrator;
}

/** What one stage produced for one request. */
interface StageResult {
  readonly tokenIds: number[];
  text: string;
  finishReason: FinishReason | null;
  stopReason: string | number | null;
  kv: KvHandoff | undefined;
  times: RequestTimes | null;
  numCachedTokens: number;
}

export class StagePipeline implements Orchestrator {
  private readonly nowMs: () => number;
  private readonly edges: EdgeChannel[];
  /** per stage: requests finished so far (batch_id, the Mar-2026+ definition: 1-based finished count per stage) */
  private readonly finishedPerStage: number[];

  /**
   * @param importedTokens per stage, the imported KV positions of requests submitted to it and not yet seen in its step
   *   stats (buildPipeline shares these queues with the stages' listeners)
   */
  constructor(private readonly stages: readonly Stage[], private readonly options: StagePipelineOptions = {}, private readonly importedTokens: number[][] = stages.map(() => [])) {
    this.nowMs = options.nowMs ?? clockNowMs;
    this.edges = stages.slice(1).map((_, i) => new EdgeChannel(i, i + 1));
    this.finishedPerStage = stages.map(() => 0);
  }

  /** the response's model: the last stage's */
  get modelConfig(): ModelConfig { return this.stages[this.stages.length - 1]!.orchestrator.modelConfig; }
  get maxModelLen(): number { return this.stages[0]!.orchestrator.maxModelLen; }
  /** prompts are tokenized for stage 0 */
  get tokenizer(): Tokenizer { return this.stages[0]!.orchestrator.tokenizer; }
  get numStages(): number { return this.stages.length; }

  deathReason(): string | null {
    for (const s of this.stages) {
      if (!s.orchestrator.isHealthy()) return `stage ${s.spec.stageId}: ${s.orchestrator.deathReason?.() ?? "engine dead"}`;
    }
    return null;
  }

  isHealthy(): boolean {
    return this.stages.every((s) => s.orchestrator.isHealthy());
  }

  async shutdown(): Promise<void> {
    for (const edge of this.edges) edge.close();
    await Promise.all(this.stages.map((s) => s.orchestrator.shutdown()));
  }

  private warned = false;
  private warnOnce(line: string): void {
    if (this.warned) return;
    this.warned = true;
    (this.options.warn ?? ((l: string) => process.stderr.write(`${l}\n`)))(line);
  }

  /** first stage of the last KV-linked run: its outputs onward are what the client sees */
  private finalRunStart(): number {
    let k = this.stages.length - 1;
    while (k > 0 && this.stages[k]!.spec.input === "kv_blocks") k--;
    return k;
  }

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    // a bad request for this pipeline (400), not a pipeline failure
    if (this.stages.length > 1 && request.sampling.n !== 1) throw new EngineRequestError("invalid_request", `multi-stage pipelines take n = 1 (got n = ${request.sampling.n})`);
    // the tables name the request as its client knows it (vLLM-Omni prints the OpenAI ids online)
    const tableId = request.externalRequestId ?? request.requestId;
    const aggregator = this.options.tables?.aggregatorFor(tableId) ?? null;
    aggregator?.markWallStart(this.nowMs());
    const submitMs = this.nowMs();
    const finalRunStart = this.finalRunStart();
    const stageStats: StageRequestStats[] = [];
    const edgeStats: TransferEdgeStats[] = [];
    let prompt: readonly number[] = request.promptTokenIds;
    let importKv: KvHandoff | undefined;
    /** tokens / text of the current KV-linked run (the sequence being continued) */
    let runTokenIds: number[] = [];
    let runText = "";
    let stage0: StageResult | null = null;
    let firstVisibleTokenMs: number | null = null;
    let last: StageResult | null = null;
    let finished = false;
    let held: RequestOutput | null = null;
    let reported = false;
    /** an import whose first output the stage's step stats have not shown yet (dropped if the request ends first) */
    let unconsumedImport: { stage: number; numTokens: number } | null = null;

    try {
      for (let i = 0; i < this.stages.length; i++) {
        const { spec, orchestrator } = this.stages[i]!;
        const next = this.stages[i + 1]?.spec;
        const exportKv = next?.input === "kv_blocks";
        const visible = i >= finalRunStart;
        let sampling = stageSampling(request.sampling, spec);
        if (spec.input === "kv_blocks" && sampling.maxTokens !== null) sampling = { ...sampling, maxTokens: sampling.maxTokens - runTokenIds.length };
        if (exportKv) sampling = { ...sampling, maxTokens: 1 };
        const stageRequest: GenerateRequest = {
          requestId: request.requestId, promptTokenIds: prompt, sampling, arrivalMs: i === 0 ? request.arrivalMs : this.nowMs(),
          ...(exportKv ? { exportKv: true } : {}), ...(importKv ? { importKv } : {}),
        };
        const stageSubmitMs = this.nowMs();
        aggregator?.onStageInput(i, stageSubmitMs);
        if (importKv) {
          this.importedTokens[i]!.push(importKv.numTokens);
          unconsumedImport = { stage: i, numTokens: importKv.numTokens };
        }
        const result: StageResult = { tokenIds: [], text: "", finishReason: null, stopReason: null, kv: undefined, times: null, numCachedTokens: 0 };
        for await (const out of orchestrator.generate(stageRequest, signal)) {
          aggregator?.onStageOutput(i, this.nowMs());
          if (out.outputs.some((o) => o.tokenIdsDelta.length > 0)) unconsumedImport = null;
          const choice = out.outputs[0];
          if (choice) {
            result.tokenIds.push(...choice.tokenIdsDelta);
            result.text += choice.textDelta;
            if (choice.finishReason !== null) { result.finishReason = choice.finishReason; result.stopReason = choice.stopReason; }
          }
          result.times = out.times;
          result.numCachedTokens = out.numCachedTokens;
          if (out.kv) result.kv = out.kv;
          // the request's last output is held back until its stats are recorded: consumers stop at `finished`
          if (this.stages.length === 1) {
            // single stage: pass every choice through untouched (n > 1 included)
            if (out.outputs.length > 0 && firstVisibleTokenMs === null) firstVisibleTokenMs = out.times.firstTokenMs;
            if (out.finished) { held = out; break; }
            yield out;
            continue;
          }
          if (!visible || !choice) continue;
          if (firstVisibleTokenMs === null && choice.tokenIdsDelta.length > 0) firstVisibleTokenMs = out.times.firstTokenMs ?? this.nowMs();
          const sequenceEnds = out.finished && !this.continues(i, result, request.sampling.maxTokens, runTokenIds.length);
          const client = this.clientOutput(request, out, choice, runTokenIds.length + result.tokenIds.length, stage0 ?? result, firstVisibleTokenMs, sequenceEnds);
          if (sequenceEnds) { held = client; break; }
          yield client;
          if (out.finished) break;
        }
        if (i === 0) stage0 = result;
        last = result;
        const stageDoneMs = this.nowMs();
        this.finishedPerStage[i]!++;
        const stats = { stageId: i, numTokensIn: prompt.length, numTokensOut: result.tokenIds.length, batchId: this.finishedPerStage[i]!, batchSize: 1, stageGenTimeMs: stageDoneMs - stageSubmitMs, postprocessTimeMs: 0 };
        stageStats.push(stats);
        if (signal?.aborted || result.finishReason === "abort" || result.finishReason === "error" || result.finishReason === null) break;
        runTokenIds = [...runTokenIds, ...result.tokenIds];
        runText += result.text;
        if (!next) { finished = true; break; }

        // skip KV continuations of a sequence that already ended (EOS, or max_tokens reached in this stage)
        let j = i + 1;
        if (!this.continues(i, result, request.sampling.maxTokens, runTokenIds.length - result.tokenIds.length)) {
          while (j < this.stages.length && this.stages[j]!.spec.input === "kv_blocks") j++;
          if (j >= this.stages.length) { finished = true; break; }
        }
        const handoff = await this.handOff(request.requestId, i, j, result, prompt, runText);
        stageStats[stageStats.length - 1] = { ...stats, postprocessTimeMs: handoff.postprocessTimeMs };
        edgeStats.push(handoff.edge);
        importKv = handoff.importKv;
        if (this.stages[j]!.spec.input === "text") {
          runTokenIds = [];
          runText = "";
        }
        prompt = handoff.nextPrompt;
        i = j - 1;
      }
      const finalizeMs = this.nowMs();
      if (finished && aggregator) {
        aggregator.finalize({ requestId: tableId, submitMs, finalizeMs, stages: stageStats, edges: edgeStats });
        this.options.tables?.finalized(tableId, aggregator);
      }
      reported = true;
      if (this.options.listener && stage0 && last) {
        this.options.listener.onRequestFinished(this.finishedStats(request, stage0, last, runTokenIds.length || last.tokenIds.length, finalizeMs, firstVisibleTokenMs, signal?.aborted ?? false));
      }
      if (held) yield held;
    } finally {
      if (unconsumedImport) {
        const queue = this.importedTokens[unconsumedImport.stage]!;
        const at = queue.lastIndexOf(unconsumedImport.numTokens);
        if (at >= 0) queue.splice(at, 1);
      }
      // the consumer went away (or a stage failed) before the end: count it in no finished-request metric
      if (!reported && this.options.listener && stage0 && last) {
        this.options.listener.onRequestFinished(this.finishedStats(request, stage0, last, last.tokenIds.length, this.nowMs(), firstVisibleTokenMs, true));
      }
    }
  }

  /**
   * Moves stage i's result over edge i -> j: the KV blocks (plus the prompt extended by the generated tokens) or the
   * run's text (tokenized for stage j). Times tx / in-flight / rx-decode on the edge, and the upstream postprocess.
   */
  private async handOff(requestId: string, i: number, j: number, result: StageResult, prompt: readonly number[], runText: string): Promise<{
    nextPrompt: readonly number[]; importKv: KvHandoff | undefined; edge: TransferEdgeStats; postprocessTimeMs: number;
  }> {
    const target = this.stages[j]!;
    const channel = this.edges[j - 1]!;
    const kvEdge = target.spec.input === "kv_blocks";
    const kvPrompt = [...prompt, ...result.tokenIds];
    const txStartMs = this.nowMs();
    let payload: Uint8Array;
    if (!kvEdge) {
      payload = encodeText(runText);
    } else if (result.kv) {
      payload = encodeKv(result.kv);
    } else {
      // the stage's engine cannot export KV blocks: send the token ids and let the next stage recompute them
      this.warnOnce(`fennec: stage ${i}'s engine returned no KV blocks; stage ${j} recomputes the prompt (edge ${i}->${j} carries token ids)`);
      payload = new Uint8Array(Int32Array.from(kvPrompt).buffer); // [numTokens] int32
    }
    const { sizeBytes } = channel.send(requestId, payload);
    const txTimeMs = this.nowMs() - txStartMs;
    const received = await channel.receive(requestId);

    const rxStartMs = this.nowMs();
    let importKv: KvHandoff | undefined;
    let receivedText = "";
    let nextPrompt: readonly number[] = kvPrompt;
    if (!kvEdge) {
      receivedText = decodeText(received.payload);
    } else if (result.kv) {
      const kv = decodeKv(received.payload);
      if (!kv.ok) throw new PipelineRequestError(`edge ${i}->${j}: ${kv.error}`);
      importKv = kv.value;
    } else {
      nextPrompt = [...new Int32Array(received.payload.buffer, received.payload.byteOffset, received.payload.byteLength / 4)];
    }
    const rxDecodeTimeMs = this.nowMs() - rxStartMs;

    // turning text into the next stage's prompt is the upstream stage's postprocess (omni's custom_process_input_func)
    // a KV edge has nothing to post-process: 0 (not two clock reads apart), so the row drops out of the table as
    // vLLM-Omni's does instead of printing 0.000 for a value that is only clock noise
    let postprocessTimeMs = 0;
    if (!kvEdge) {
      const postStartMs = this.nowMs();
      nextPrompt = target.orchestrator.tokenizer.encode(receivedText, { addSpecial: true, parseSpecial: false });
      postprocessTimeMs = this.nowMs() - postStartMs;
    }
    return { nextPrompt, importKv, postprocessTimeMs, edge: { fromStage: i, toStage: j, sizeBytes, txTimeMs, inFlightTimeMs: received.inFlightTimeMs, rxDecodeTimeMs } };
  }

  /** whether stage i's sequence goes on in stage i+1: never after the last stage, always into a text stage, and into a
   * KV continuation unless the sequence ended (EOS / stop) or used up max_tokens */
  private continues(i: number, result: StageResult, maxTokens: number | null, runBefore: number): boolean {
    const next = this.stages[i + 1];
    if (!next) return false;
    if (next.spec.input !== "kv_blocks") return true;
    if (result.finishReason !== "length") return false;
    return maxTokens === null || runBefore + result.tokenIds.length < maxTokens;
  }

  private clientOutput(request: GenerateRequest, out: RequestOutput, choice: CompletionOutput, numGenerated: number, stage0: StageResult, firstTokenMs: number | null, sequenceEnds: boolean): RequestOutput {
    return {
      requestId: request.requestId,
      outputs: [{ ...choice, numGeneratedTokens: numGenerated, finishReason: sequenceEnds ? choice.finishReason : null, stopReason: sequenceEnds ? choice.stopReason : null }],
      numPromptTokens: request.promptTokenIds.length,
      numCachedTokens: stage0.numCachedTokens,
      finished: sequenceEnds,
      times: {
        arrivalMs: request.arrivalMs, queuedMs: stage0.times?.queuedMs ?? null, scheduledMs: stage0.times?.scheduledMs ?? null,
        firstTokenMs, lastTokenMs: out.times.lastTokenMs,
      },
    };
  }

  private finishedStats(request: GenerateRequest, stage0: StageResult, last: StageResult, numGenerated: number, finalizeMs: number, firstTokenMs: number | null, clientAborted: boolean): FinishedRequestStats {
    const t0 = stage0.times;
    const queuedMs = t0?.queuedMs ?? null;
    const scheduledMs = t0?.scheduledMs ?? null;
    const lastTokenMs = last.times?.lastTokenMs ?? null;
    const sec = (a: number | null, b: number | null) => (a === null || b === null ? 0 : Math.max(0, b - a) / 1000);
    const decodeS = sec(firstTokenMs, lastTokenMs);
    return {
      requestId: request.requestId, finishReason: clientAborted ? "abort" : (last.finishReason ?? "abort"), clientAborted,
      numPromptTokens: request.promptTokenIds.length, numGenerationTokens: numGenerated, numCachedTokens: stage0.numCachedTokens,
      maxTokensParam: request.sampling.maxTokens, n: request.sampling.n,
      times: { arrivalMs: request.arrivalMs, queuedMs, scheduledMs, firstTokenMs, lastTokenMs },
      e2eLatencyS: sec(request.arrivalMs, finalizeMs), queuedTimeS: sec(queuedMs, scheduledMs), prefillTimeS: sec(scheduledMs, firstTokenMs),
      decodeTimeS: decodeS, inferenceTimeS: sec(scheduledMs, lastTokenMs), meanTimePerOutputTokenS: numGenerated > 1 ? decodeS / (numGenerated - 1) : 0,
    };
  }
}
