/**
 * The engine Worker: loads its model runner, then runs the busy loop schedule -> execute -> sample -> one `step`
 * message per engine step. Messages in: init (once), add, abort, shutdown. The loop yields to the event loop after
 * every step so an abort lands between two steps at the latest (its blocks are freed at once).
 */
import { freemem, totalmem } from "node:os";
import { EngineCore } from "./engine-core.ts";
import { resolveEngineConfig } from "./engine-sizing.ts";
import { loadRunner } from "./load-runner.ts";
import { checkDraftVocabulary } from "./spec-decode/draft-model-proposer.ts";
import { unpackGrammarVocab, type EngineWorkerSpec, type FromEngine, type RequestDelta, type ToEngine } from "./protocol.ts";
import type { StepStats } from "./stats.ts";
import type { ModelRunner } from "../model/model-batch.ts";
import { nowMs } from "../util/clock.ts";
import { unreachable } from "../util/result.ts";
import { errorMessage } from "../util/error-message.ts";

declare const self: Worker;

function post(message: FromEngine): void {
  self.postMessage(message);
}

/** A step message, with the KV cache events taken since the last one (only when there are some, as vLLM publishes). */
function postStep(engine: EngineCore, deltas: readonly RequestDelta[], stats: StepStats): void {
  const events = engine.takeKvEvents();
  post({ type: "step", deltas, stats, ...(events.length > 0 ? { kvEvents: { ts: Date.now() / 1000, events } } : {}) });
}

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** vLLM Scheduler: events are collected only when enabled with a publisher that sends them */
const kvEventsOn = (args: EngineWorkerSpec["engineArgs"]): boolean =>
  args.kvEventsConfig?.enableKvCacheEvents === true && args.kvEventsConfig.publisher !== "null";

class EngineWorker {
  private engine: EngineCore | null = null;
  private runner: ModelRunner | null = null;
  private wake: (() => void) | null = null;
  private stopped = false;
  /** messages that arrive while the model loads */
  private readonly pending: ToEngine[] = [];
  /** reset_prefix_cache calls, run by the loop before its next step */
  private readonly resets: Extract<ToEngine, { type: "resetPrefixCache" }>[] = [];
  /** the model file's bytes from the main thread (sleep level 1), until the load has read them */
  private hostBytes: ArrayBuffer | null = null;

  /** the runner spec with the host copy, which this worker then forgets */
  private takeHostBytes(runner: EngineWorkerSpec["runner"]): EngineWorkerSpec["runner"] {
    const hostBytes = this.hostBytes;
    this.hostBytes = null;
    return runner.kind === "model" && hostBytes !== null ? { ...runner, hostBytes } : runner;
  }

  handle(message: ToEngine): void {
    switch (message.type) {
      case "init": {
        // sleep level 1's host copy is held here, not in the spec the engine keeps for its life: the load takes it
        // and lets it go, so the file's bytes do not stay beside the engine's own copy of the weights
        const runner = message.spec.runner;
        if (runner.kind === "model" && runner.hostBytes !== undefined) this.hostBytes = runner.hostBytes;
        void this.start(runner.kind === "model" ? { ...message.spec, runner: { kind: "model", modelPath: runner.modelPath } } : message.spec);
        return;
      }
      case "add": {
        if (!this.engine) { this.pending.push(message); return; }
        const error = this.engine.addRequest(message.request);
        if (error) post({ type: "requestError", requestId: message.request.requestId, ...error });
        this.wakeLoop();
        return;
      }
      case "abort":
        if (!this.engine) { this.pending.push(message); return; }
        this.engine.abort(message.requestIds);
        // an idle engine sends no more steps: report the emptied queues and cache once (gauges back to 0)
        if (!this.engine.hasWork()) postStep(this.engine, [], this.engine.idleStats());
        return;
      case "resetPrefixCache":
        // between two steps, never inside one (a step awaits its kernels; preempting a request it runs would lose it)
        if (!this.engine) { this.pending.push(message); return; }
        this.resets.push(message);
        this.wakeLoop();
        return;
      case "loadLora":
      case "unloadLora": {
        if (!this.engine) { this.pending.push(message); return; }
        const error = message.type === "loadLora" ? this.engine.loadLora(message.name, message.path, message.loraIntId) : this.engine.unloadLora(message.name);
        post({ type: "loraResult", id: message.id, error });
        // the gauge of adapters: an idle engine reports once
        if (!this.engine.hasWork()) postStep(this.engine, [], this.engine.idleStats());
        return;
      }
      case "shutdown":
        this.stopped = true;
        this.wakeLoop();
        return;
      default:
        unreachable(message);
    }
  }

  private wakeLoop(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  private async start(spec: EngineWorkerSpec): Promise<void> {
    try {
      const fromHost = this.hostBytes !== null;
      const loaded = await loadRunner(this.takeHostBytes(spec.runner), spec.engineArgs);
      // the host copy is garbage now (the weights are in the kernels' memories): give it back before serving
      if (fromHost) Bun.gc(true);
      if (!loaded.ok) { post({ type: "fatal", message: loaded.error }); return; }
      const { runner, backend, lost } = loaded.value;
      this.runner = runner;
      lost?.then((reason) => {
        post({ type: "fatal", message: `device lost: ${reason}` });
        this.stopped = true;
        this.wakeLoop();
      });
      // method draft_model: the draft GGUF on its own backend, checked against the target's vocabulary
      const speculative = spec.engineArgs.speculativeConfig ?? null;
      let draftRunner: ModelRunner | null = null;
      if (speculative?.method === "draft_model" && speculative.model !== null) {
        const draft = await loadRunner({ kind: "model", modelPath: speculative.model }, spec.engineArgs);
        if (!draft.ok) { post({ type: "fatal", message: `speculative draft model: ${draft.error}` }); return; }
        draftRunner = draft.value.runner;
        const same = checkDraftVocabulary(runner.config, draftRunner.config, loaded.value.tokens ?? null, draft.value.tokens ?? null);
        if (!same.ok) { draftRunner.dispose(); post({ type: "fatal", message: same.error }); return; }
      }
      const config = resolveEngineConfig(spec.engineArgs, runner, freemem(), totalmem(), draftRunner?.kvBytesPerBlock(spec.engineArgs.blockSize) ?? 0, loaded.value.placed ?? null);
      if (!config.ok) { draftRunner?.dispose(); post({ type: "fatal", message: config.error }); return; }
      const lora = spec.engineArgs.lora ?? null;
      try {
        this.engine = new EngineCore(runner, config.value, spec.engineIndex, nowMs, spec.engineArgs.seed ?? Date.now(), {
        grammarVocab: spec.grammarVocab ? unpackGrammarVocab(spec.grammarVocab) : null, onWake: () => this.wakeLoop(), draftRunner, debugLog: spec.engineArgs.debugLog === true,
        blockHashing: { algo: spec.engineArgs.prefixCachingHashAlgo ?? "sha256", seed: spec.engineArgs.pythonHashSeed ?? null },
        kvEvents: kvEventsOn(spec.engineArgs) ? { intHashes: spec.engineArgs.kvEventsUseIntBlockHashes ?? true } : null,
          lora,
        });
      } catch (e) {
        // a bad --lora-modules adapter, or LoRA on a backend without the per-row kernel: the start-up's one line
        if (lora === null) throw e;
        draftRunner?.dispose();
        post({ type: "fatal", message: e instanceof Error ? e.message : String(e) });
        return;
      }
      await this.engine.peer?.listen();
      const startupLines = [...(loaded.value.startupLines ?? []), ...(config.value.kvCacheLines ?? []), ...(this.engine.offload?.describe() ?? []), ...(this.engine.peer?.describe() ?? [])];
      post({ type: "ready", config: runner.config, numKvBlocks: config.value.numBlocks, ...(config.value.kvCacheFacts ? { kvCache: config.value.kvCacheFacts } : {}), numCpuBlocks: this.engine.offload?.capacityBlocks ?? null, startupLines, maxModelLen: config.value.maxModelLen, backend, pooler: config.value.pooler ?? null });
      for (const m of this.pending.splice(0)) this.handle(m);
      await this.loop(this.engine);
    } catch (e) {
      post({ type: "fatal", message: errorMessage(e) });
    } finally {
      // the offload tier's disk file is unlinked here on a clean shutdown (and at the next start-up after a crash)
      this.engine?.dispose();
      this.runner?.dispose();
      globalThis.close();
    }
  }

  /** requests that failed outside addRequest (a grammar that would not compile, a grammar dead end) */
  private postLateErrors(engine: EngineCore): void {
    const errors = engine.takeLateErrors();
    for (const e of errors) post({ type: "requestError", requestId: e.requestId, code: e.code, message: e.message });
    if (errors.length > 0 && !engine.hasWork()) postStep(engine, [], engine.idleStats());
  }

  /** the queued prefix-cache resets, each answered; an idle engine then reports its step (the cleared-blocks event) */
  private runResets(engine: EngineCore): void {
    if (this.resets.length === 0) return;
    for (const r of this.resets.splice(0)) post({ type: "prefixCacheReset", id: r.id, success: engine.resetPrefixCache(r.resetRunningRequests) });
    if (!engine.hasWork()) postStep(engine, [], engine.idleStats());
  }

  private async loop(engine: EngineCore): Promise<void> {
    while (!this.stopped) {
      this.postLateErrors(engine);
      this.runResets(engine);
      if (!engine.hasWork()) {
        await new Promise<void>((resolve) => { this.wake = resolve; });
        continue;
      }
      const result = await engine.step();
      if (result) postStep(engine, result.deltas, result.stats);
      // nothing schedulable (every waiting request deferred): do not spin hot
      if (result) await yieldToEventLoop();
      else await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
}

const worker = new EngineWorker();
self.onmessage = (event: MessageEvent<ToEngine>) => worker.handle(event.data);
