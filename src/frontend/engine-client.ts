/**
 * Main-thread side of one engine Worker (vLLM EngineCoreClient): starts the Worker, waits for `ready`, sends add /
 * abort, and hands every message coming back to the orchestrator's handlers. Never runs model code.
 * @example const client = await EngineClient.start(spec, handlers); client.add(request);
 */
import { workerEntryUrl } from "../util/compiled-entry.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { EngineRequest, EngineWorkerSpec, FromEngine, KvCacheFacts, RequestDelta, ToEngine } from "../engine/protocol.ts";
import type { StepStats } from "../engine/stats.ts";
import type { ResolvedPooler } from "../engine/resolve-pooler.ts";
import { unreachable } from "../util/result.ts";
import { createEventPublisher, type EventPublisher } from "../kv-events/kv-event-publisher.ts";

export interface EngineClientHandlers {
  onStep(deltas: readonly RequestDelta[], stats: StepStats): void;
  onRequestError(requestId: string, code: string, message: string): void;
  /** the engine is dead: every request it held has failed */
  onFatal(message: string): void;
}

export interface EngineReadyInfo {
  readonly config: ModelConfig;
  readonly numKvBlocks: number;
  /** the pool in tokens and its max concurrency (absent: a fake engine that does not say) */
  readonly kvCache?: KvCacheFacts;
  /** blocks of the KV offload tier; null without one */
  readonly numCpuBlocks: number | null;
  /** the engine's start-up log lines (the KV offload tier's), for the server's logger */
  readonly startupLines: readonly string[];
  readonly maxModelLen: number;
  readonly backend: string;
  /** a pooling engine's rules; null: it generates */
  readonly pooler: ResolvedPooler | null;
}

/** Where the engine Worker's code is, from source or inside the compiled binary. */
function defaultWorkerUrl(): string {
  return workerEntryUrl(import.meta.url, "../engine/worker.ts", "engine/worker.js");
}

/** How long shutdown waits for the Worker to leave on its own before terminating it. */
const SHUTDOWN_GRACE_MS = 2000;

export class EngineClient {
  private dead = false;
  private closed: Promise<void>;
  /** reset_prefix_cache calls waiting for the engine's answer, by id */
  private readonly resets = new Map<number, (success: boolean) => void>();
  private nextResetId = 0;

  private constructor(private readonly worker: Worker, readonly ready: EngineReadyInfo, private readonly publisher: EventPublisher) {
    this.closed = new Promise((resolve) => worker.addEventListener("close", () => resolve(), { once: true }));
  }

  /**
   * Starts the Worker and resolves once its model is loaded; rejects with the engine's one-line error otherwise. With
   * --kv-events-config the engine's KV events go out on its publisher (vLLM: one ZmqEventPublisher per engine core,
   * ports offset by its data-parallel rank), opened before the model loads so a taken port fails fast.
   */
  static start(spec: EngineWorkerSpec, handlers: EngineClientHandlers, workerUrl?: URL | string): Promise<EngineClient> {
    const opened = createEventPublisher(spec.engineArgs.kvEventsConfig ?? null, spec.engineIndex, (line) => console.warn(line));
    if (!opened.ok) return Promise.reject(new Error(opened.error));
    const publisher = opened.value;
    let worker: Worker;
    try {
      worker = new Worker(workerUrl ?? defaultWorkerUrl());
    } catch (e) {
      void publisher.shutdown();
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    return new Promise((resolve, reject) => {
      let client: EngineClient | null = null;
      const fatal = (message: string): void => {
        if (!client) { void publisher.shutdown(); reject(new Error(message)); worker.terminate(); return; }
        if (client.dead) return;
        client.dead = true;
        handlers.onFatal(message);
      };
      worker.onmessage = (event: MessageEvent<FromEngine>) => {
        const msg = event.data;
        switch (msg.type) {
          case "ready":
            client = new EngineClient(worker, { config: msg.config, numKvBlocks: msg.numKvBlocks, ...(msg.kvCache ? { kvCache: msg.kvCache } : {}), numCpuBlocks: msg.numCpuBlocks ?? null, startupLines: msg.startupLines ?? [], maxModelLen: msg.maxModelLen, backend: msg.backend, pooler: msg.pooler ?? null }, publisher);
            client.closed.then(() => fatal("engine worker exited"));
            resolve(client);
            return;
          case "step":
            if (msg.kvEvents) publisher.publish(msg.kvEvents);
            handlers.onStep(msg.deltas, msg.stats);
            return;
          case "requestError": handlers.onRequestError(msg.requestId, msg.code, msg.message); return;
          case "loraResult": client?.settleLora(msg.id, msg.error); return;
          case "fatal": fatal(msg.message); return;
          case "prefixCacheReset": client?.settleReset(msg.id, msg.success); return;
          default: unreachable(msg);
        }
      };
      worker.onerror = (event: ErrorEvent) => fatal(`engine worker crashed: ${event.message}`);
      // a host copy of the model file moves to the Worker (no second copy)
      const host = spec.runner.kind === "model" ? spec.runner.hostBytes : undefined;
      worker.postMessage({ type: "init", spec } satisfies ToEngine, host !== undefined ? [host] : []);
    });
  }

  get isAlive(): boolean {
    return !this.dead;
  }

  add(request: EngineRequest): void {
    this.send({ type: "add", request });
  }

  abort(requestIds: readonly string[]): void {
    if (requestIds.length > 0) this.send({ type: "abort", requestIds });
  }

  /** vLLM EngineCoreClient.reset_prefix_cache: whether the engine forgot its cached prefixes (false once it is dead). */
  resetPrefixCache(resetRunningRequests: boolean): Promise<boolean> {
    if (this.dead) return Promise.resolve(false);
    const id = this.nextResetId++;
    const answered = new Promise<boolean>((resolve) => this.resets.set(id, resolve));
    this.send({ type: "resetPrefixCache", id, resetRunningRequests });
    // a worker that exits first answers no more
    return Promise.race([answered, this.closed.then(() => false)]);
  }

  private settleReset(id: number, success: boolean): void {
    this.resets.get(id)?.(success);
    this.resets.delete(id);
  }

  async shutdown(): Promise<void> {
    if (!this.dead) {
      this.dead = true;
      this.send({ type: "shutdown" });
    }
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS).unref?.());
    await Promise.race([this.closed, timeout]);
    this.worker.terminate();
    // after the worker's last step message: its events are sent before the sockets close
    await this.publisher.shutdown();
  }

  private send(message: ToEngine): void {
    this.worker.postMessage(message);
  }

  /** loadLora / unloadLora calls waiting for the engine's answer, by id */
  private readonly loraCalls = new Map<number, (error: string | null) => void>();
  private nextLoraCall = 1;

  /** Registers (the engine reads and checks it) a LoRA adapter: null, or the one-line reason it was refused. */
  loadLora(name: string, path: string, loraIntId: number): Promise<string | null> {
    const id = this.nextLoraCall++;
    return new Promise((resolve) => {
      this.loraCalls.set(id, resolve);
      this.send({ type: "loadLora", id, name, path, loraIntId });
    });
  }

  /** Forgets a LoRA adapter: null, or why not (unknown name). */
  unloadLora(name: string): Promise<string | null> {
    const id = this.nextLoraCall++;
    return new Promise((resolve) => {
      this.loraCalls.set(id, resolve);
      this.send({ type: "unloadLora", id, name });
    });
  }

  private settleLora(id: number, error: string | null): void {
    const settle = this.loraCalls.get(id);
    this.loraCalls.delete(id);
    settle?.(error);
  }
}
