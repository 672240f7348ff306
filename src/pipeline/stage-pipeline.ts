/**
 * A chain of stages behind the one Orchestrator interface the server and run-batch use (vLLM-Omni's orchestrator:
 * vllm_omni/entrypoints/omni.py, one stage after the other per request). Each stage is its own orchestrator (own
 * engine, own model); edge i -> i+1 carries either the prompt's KV blocks (stage i stops after the first token, stage
 * i+1 continues the same sequence: the disaggregated prefill/decode of `--pipeline pd`) or stage i's output text (the
 * next stage's prompt).
 *
 * What the client sees: the output of the last "run" of stages linked by KV edges (for pd: the first token from
 * stage 0, then stage 1's tokens), so greedy pd output equals single-stage output.
 * What it records: per stage StageRequestStats, per edge TransferEdgeStats (tx / in-flight / rx-decode through an
 * EdgeChannel), per stage first-input / last-output times, and one FinishedRequestStats for the whole request.
 * Multi-stage chains take n = 1 only (a KV handoff continues exactly one sequence). One stage is single-stage.ts.
 */
import type { KvHandoff } from "../engine/protocol.ts";
import type { KvPeerTransfer } from "../engine/stats.ts";
import type { IterationStats, StatsListener } from "../frontend/iteration-stats.ts";
import { EngineRequestError, type CompletionOutput, type GenerateRequest, type Orchestrator, type RequestOutput } from "../frontend/orchestrator.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { nowMs as clockNowMs } from "../util/clock.ts";
import { EdgeChannel } from "./edge-channel.ts";
import { decodeKv, encodeKv } from "./kv-handoff.ts";
import { absorbOutput, emptyStageResult, finalizeTables, reportRun, stageFailed, startRun, type RequestRun, type StagePipelineOptions, type StageResult } from "./request-run.ts";
import { RemotePrefillStage } from "./remote-prefill-stage.ts";
import { SingleStage } from "./single-stage.ts";
import { stageSampling, type StageChain, type StageSpec } from "./stage-config.ts";
import type { StageRequestStats, TransferEdgeStats } from "./stage-stats.ts";
import { decodeText, encodeText } from "./text-handoff.ts";

/** Builds one stage's orchestrator; `listener` gets that stage's step stats (engine label = stage id). */
export type StageFactory = (stage: StageSpec, engineIndex: number, listener: StatsListener | null) => Promise<Orchestrator>;

/** How long after its stage ended a read's report may still come (it rides on an engine step's stats) */
const TRANSFER_REPORT_WAIT_MS = 2000;

export class PipelineRequestError extends Error {
  override readonly name = "PipelineRequestError";
}

/**
 * How a stage's step stats reach /metrics: the request's TTFT is stage 0's; a KV continuation's first token is an
 * inter-token gap of the same sequence (its engine counts the positions it imported as external_kv_transfer prompt
 * tokens itself); a text stage starts a new generation whose TTFT is not the request's.
 */
function stageListener(listener: StatsListener | null, stage: StageSpec, previous: StageSpec | undefined, transfers: TransferBoard): StatsListener {
  // after a prefill stage in another process, this stage generates the client's first token itself (as vLLM's decode instance)
  const role = stage.stageId === 0 || previous?.url ? "first" : stage.input === "kv_blocks" ? "continuation" : "new-generation";
  return {
    onStep(stats: IterationStats): void {
      for (const t of stats.kvPeer?.transfers ?? []) if (t.requestId !== undefined) transfers.record(t.requestId, t);
      if (listener === null) return;
      if (role === "first") return listener.onStep(stats);
      if (role === "new-generation") return listener.onStep({ ...stats, engineIndex: stage.stageId, timeToFirstTokensS: [] });
      const interTokenLatenciesS = [...stats.timeToFirstTokensS, ...stats.interTokenLatenciesS];
      listener.onStep({ ...stats, engineIndex: stage.stageId, timeToFirstTokensS: [], interTokenLatenciesS });
    },
    // the pipeline reports each request once, as a whole
    onRequestFinished(): void {},
  };
}

/** Builds every stage (shutting down the built ones if one fails) and the pipeline over them. */
export async function buildPipeline(chain: StageChain, factory: StageFactory, options: StagePipelineOptions = {}): Promise<Orchestrator & { readonly numStages: number }> {
  const built: Orchestrator[] = [];
  const transfers = new TransferBoard();
  const hasRemote = chain.stages.some((s) => s.url);
  try {
    for (const stage of chain.stages) {
      const previous = chain.stages[stage.stageId - 1];
      const listener = options.listener || hasRemote ? stageListener(options.listener ?? null, stage, previous, transfers) : null;
      built.push(stage.url ? new RemotePrefillStage(stage.url, stage.stageId) : await factory(stage, stage.stageId, listener));
    }
  } catch (e) {
    await Promise.all(built.map((o) => o.shutdown()));
    throw e;
  }
  built.forEach((o, i) => { if (o instanceof RemotePrefillStage) o.bindLocal(built[i + 1]!); });
  if (built.length === 1) return new SingleStage(chain.stages[0]!, built[0]!, options);
  return new StagePipeline(chain.stages.map((spec, i) => ({ spec, orchestrator: built[i]! })), options, transfers);
}

/**
 * The KV reads the local engines made for requests whose prompt was computed by a stage in another process, by
 * request id: the edge from that stage is timed with them (the transfer is the edge). Entries are taken once.
 */
export class TransferBoard {
  private readonly done = new Map<string, KvPeerTransfer>();
  private readonly waiting = new Map<string, (t: KvPeerTransfer | null) => void>();
  record(requestId: string, transfer: KvPeerTransfer): void {
    const resolve = this.waiting.get(requestId);
    if (resolve) { this.waiting.delete(requestId); resolve(transfer); } else this.done.set(requestId, transfer);
  }
  /** the request's stage ended: a read not reported by now never happened (the decode side recomputed the prompt) */
  giveUp(requestId: string): void {
    const resolve = this.waiting.get(requestId);
    if (resolve) { this.waiting.delete(requestId); resolve(null); }
    this.done.delete(requestId);
  }
  /** the read for this request, or null when none came within `waitMs` or giveUp was called first */
  take(requestId: string, waitMs: number): Promise<KvPeerTransfer | null> {
    const t = this.done.get(requestId);
    if (t) { this.done.delete(requestId); return Promise.resolve(t); }
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.waiting.delete(requestId); resolve(null); }, waitMs);
      this.waiting.set(requestId, (x) => { clearTimeout(timer); resolve(x); });
    });
  }
}

interface Stage {
  readonly spec: StageSpec;
  readonly orchestrator: Orchestrator;
}

/** Where the sequence goes after a stage: on to stage `next` with this prompt (and KV), or it is done. */
type NextStage = {
  readonly next: number; readonly prompt: readonly number[]; readonly importKv: KvHandoff | undefined;
  /** from a prefill stage in another process: the params the next (local) stage pulls its blocks with */
  readonly kvTransferParams?: Readonly<Record<string, unknown>>;
} | { readonly done: boolean };

/** The sequence being continued across KV edges: its tokens and text so far. */
interface KvRun {
  tokenIds: number[];
  text: string;
}

export class StagePipeline implements Orchestrator {
  private readonly nowMs: () => number;
  private readonly edges: EdgeChannel[];
  /** per stage: requests finished so far (batch_id, the Mar-2026+ definition: 1-based finished count per stage) */
  private readonly finishedPerStage: number[];
  /** first stage of the last KV-linked run: its outputs onward are what the client sees */
  private readonly finalRunStart: number;

  constructor(private readonly stages: readonly Stage[], private readonly options: StagePipelineOptions = {}, private readonly transfers: TransferBoard = new TransferBoard()) {
    this.nowMs = options.nowMs ?? clockNowMs;
    this.edges = stages.slice(1).map((_, i) => new EdgeChannel(i, i + 1));
    this.finishedPerStage = stages.map(() => 0);
    let k = stages.length - 1;
    // a prefill stage in another process answers one token the client never sees: its successor generates them all
    while (k > 0 && stages[k]!.spec.input === "kv_blocks" && !stages[k - 1]!.spec.url) k--;
    this.finalRunStart = k;
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

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    // a bad request for this pipeline (400), not a pipeline failure
    if (request.sampling.n !== 1) throw new EngineRequestError("invalid_request", `multi-stage pipelines take n = 1 (got n = ${request.sampling.n})`);
    const run = startRun(request, this.options.tables ?? null, this.nowMs);
    const kvRun: KvRun = { tokenIds: [], text: "" };
    try {
      let stage = 0;
      let prompt: readonly number[] = request.promptTokenIds;
      let importKv: KvHandoff | undefined;
      let kvTransferParams: Readonly<Record<string, unknown>> | undefined;
      let finished = false;
      while (true) {
        const result = yield* this.runStage(run, stage, prompt, importKv, kvRun, signal, kvTransferParams);
        const after = await this.afterStage(run, stage, prompt, result, kvRun, signal);
        if ("done" in after) { finished = after.done; break; }
        ({ next: stage, prompt, importKv, kvTransferParams } = after);
      }
      // the reads of blocks a remote stage computed are reported with the step that made them: in by now, or never
      if (run.pendingEdges.length > 0) {
        // the step stats that carry the read arrive with the step's outputs: one macrotask later they are in
        await new Promise((resolve) => setTimeout(resolve, 0));
        this.transfers.giveUp(request.requestId);
        await Promise.all(run.pendingEdges);
      }
      const finalizeMs = this.nowMs();
      if (finished) finalizeTables(run, finalizeMs);
      reportRun(run, this.options.listener, kvRun.tokenIds.length || (run.last?.tokenIds.length ?? 0), finalizeMs, signal?.aborted ?? false);
      if (run.held) yield run.held;
    } finally {
      // the consumer went away (or a stage failed) before the end: count it in no finished-request metric
      if (!run.reported) reportRun(run, this.options.listener, run.last?.tokenIds.length ?? 0, this.nowMs(), true);
    }
  }

  /**
   * Runs one stage of the request and yields what the client sees of it (only from the final KV-linked run on). The
   * sampling is the stage's; a KV continuation gets the budget the run has left, a stage that exports KV one token.
   */
  private async *runStage(run: RequestRun, i: number, prompt: readonly number[], importKv: KvHandoff | undefined, kvRun: KvRun, signal: AbortSignal | undefined, kvTransferParams?: Readonly<Record<string, unknown>>): AsyncGenerator<RequestOutput, StageResult> {
    const { request } = run;
    const { spec, orchestrator } = this.stages[i]!;
    const exportKv = this.stages[i + 1]?.spec.input === "kv_blocks" && !spec.url;
    const visible = i >= this.finalRunStart;
    let sampling = stageSampling(request.sampling, spec);
    if (spec.input === "kv_blocks" && sampling.maxTokens !== null) sampling = { ...sampling, maxTokens: sampling.maxTokens - kvRun.tokenIds.length };
    if (exportKv) sampling = { ...sampling, maxTokens: 1 };
    // the blocks a prefill stage in another process computed: this engine (a NixlConnector consumer) pulls them
    if (kvTransferParams) sampling = { ...sampling, kvTransferParams };
    const stageRequest: GenerateRequest = {
      requestId: request.requestId, promptTokenIds: prompt, sampling, arrivalMs: i === 0 ? request.arrivalMs : this.nowMs(),
      ...(exportKv ? { exportKv: true } : {}), ...(importKv ? { importKv } : {}),
    };
    const stageSubmitMs = this.nowMs();
    run.events?.onStageInput(i, stageSubmitMs);
    const result = emptyStageResult();
    for await (const out of orchestrator.generate(stageRequest, signal)) {
      run.events?.onStageOutput(i, this.nowMs());
      absorbOutput(result, out);
      const choice = out.outputs[0];
      if (!visible || !choice) continue;
      if (run.firstVisibleTokenMs === null && choice.tokenIdsDelta.length > 0) run.firstVisibleTokenMs = out.times.firstTokenMs ?? this.nowMs();
      const sequenceEnds = out.finished && !this.continues(i, result, request.sampling.maxTokens, kvRun.tokenIds.length);
      const client = this.clientOutput(request, out, choice, kvRun.tokenIds.length + result.tokenIds.length, run.stage0 ?? result, run.firstVisibleTokenMs, sequenceEnds);
      if (sequenceEnds) { run.held = client; break; }
      yield client;
      if (out.finished) break;
    }
    // the first local stage's queue and schedule times are the request's (a remote stage has none)
    if (run.stage0 === null && !spec.url) run.stage0 = result;
    run.last = result;
    this.finishedPerStage[i]!++;
    run.stageStats.push(this.stageStats(i, prompt, result, this.nowMs() - stageSubmitMs));
    return result;
  }

  /**
   * After stage i: stop (the client went away, the stage failed, the sequence is complete) or hand the result over
   * the edge to the next stage that has work, skipping KV continuations of a sequence that already ended (EOS, or
   * max_tokens reached in this stage).
   */
  private async afterStage(run: RequestRun, i: number, prompt: readonly number[], result: StageResult, kvRun: KvRun, signal: AbortSignal | undefined): Promise<NextStage> {
    if (stageFailed(result, signal)) return { done: false };
    if (this.stages[i]!.spec.url) return this.fromRemotePrefill(run, i, prompt, result);
    const runBefore = kvRun.tokenIds.length;
    kvRun.tokenIds = [...kvRun.tokenIds, ...result.tokenIds];
    kvRun.text += result.text;
    if (i + 1 >= this.stages.length) return { done: true };
    let j = i + 1;
    if (!this.continues(i, result, run.request.sampling.maxTokens, runBefore)) {
      while (j < this.stages.length && this.stages[j]!.spec.input === "kv_blocks") j++;
      if (j >= this.stages.length) return { done: true };
    }
    const handoff = await this.handOff(run.request.requestId, i, j, result, prompt, kvRun.text);
    const stats = run.stageStats[run.stageStats.length - 1]!;
    run.stageStats[run.stageStats.length - 1] = { ...stats, postprocessTimeMs: handoff.postprocessTimeMs };
    run.edgeStats.push(handoff.edge);
    if (this.stages[j]!.spec.input === "text") kvRun.tokenIds = [], kvRun.text = "";
    return { next: j, prompt: handoff.nextPrompt, importKv: handoff.importKv };
  }

  /**
   * After a prefill stage in another process: stage i+1 gets the same prompt and the params that name the blocks. Its
   * engine's read of them is the edge: tx = connecting and sending the read (NIXL post time), in-flight = the read
   * until its last block arrived (NIXL transfer time), rx-decode = writing the blocks into the pool, size = the bytes
   * read; the record is filled in when the read is reported (timeTransfer), before the request's tables are printed.
   */
  private fromRemotePrefill(run: RequestRun, i: number, prompt: readonly number[], result: StageResult): NextStage {
    const where = `stage ${i} (${this.stages[i]!.spec.url})`;
    if (!result.kvTransferParams) throw new PipelineRequestError(`${where} answered no kv_transfer_params`);
    const edge = { fromStage: i, toStage: i + 1, sizeBytes: 0, txTimeMs: 0, inFlightTimeMs: 0, rxDecodeTimeMs: 0 };
    const index = run.edgeStats.push(edge) - 1;
    run.pendingEdges.push(this.transfers.take(run.request.requestId, TRANSFER_REPORT_WAIT_MS).then((t) => {
      if (t === null) return;
      run.edgeStats[index] = { ...edge, sizeBytes: t.bytes, txTimeMs: t.postSeconds * 1000, inFlightTimeMs: t.seconds * 1000, rxDecodeTimeMs: (t.writeSeconds ?? 0) * 1000 };
    }));
    return { next: i + 1, prompt, importKv: undefined, kvTransferParams: result.kvTransferParams };
  }

  private stageStats(i: number, prompt: readonly number[], result: StageResult, stageGenTimeMs: number): StageRequestStats {
    return { stageId: i, numTokensIn: prompt.length, numTokensOut: result.tokenIds.length, batchId: this.finishedPerStage[i]!, batchSize: 1, stageGenTimeMs, postprocessTimeMs: 0 };
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

  /** what the client sees of a stage output: choice 0 with the run's totals, finished only when the sequence ends */
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
}
