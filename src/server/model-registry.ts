/**
 * Several models behind one server: each served name maps to a model loaded on first use (its own engine, scheduler,
 * KV cache and Worker), so a crash in one is that model's error, not the server's. Budgets follow Ollama's scheduler
 * (server/sched.go): at most `maxLoadedModels` loaded (OLLAMA_MAX_LOADED_MODELS; llama-server's --models-max) and
 * their bytes under `maxMemoryBytes`; when a load would exceed either, the least recently used idle model is unloaded
 * first. An idle model is unloaded after its keep-alive (Ollama's keep_alive: the timer starts when its last request
 * finishes; 0 unloads at once, a negative value keeps it forever; a request's value replaces the model's). Requests
 * for a model being loaded wait in its queue, bounded: past it they are refused (vLLM's overload 503).
 * The Ollama dialect sets a request's keep_alive through `keepAlive(name, ms)` or `lease.release(ms)`.
 * @example const lease = await registry.acquire("qwen"); try { ... lease.model ... } finally { lease.release(); }
 */
import { errorMessage } from "../util/error-message.ts";

/** Why a model is unloaded: evicted under a budget (--max-loaded-models, the memory limit), or one of the others. */
export type UnloadReason = "max loaded models" | "memory limit" | "idle past its keep_alive" | "keep_alive 0" | "requested" | "engine dead" | "shutdown";

/** An unload that made room for another model: the model is likely wanted again soon (models taking turns). */
export function isEviction(reason: UnloadReason): boolean {
  return reason === "max loaded models" || reason === "memory limit";
}

/** What the registry needs of a loaded model: a way to stop it, and (optionally) whether its engine still lives. */
export interface LoadableModel {
  shutdown(reason?: UnloadReason): Promise<void>;
  isHealthy?(): boolean;
}

export interface ModelSpec<T> {
  /** the first served name: what /v1/models lists */
  readonly name: string;
  /** other names requests may use for the same model */
  readonly aliases?: readonly string[];
  /** where it comes from (a GGUF path, a Hub name): `root` in /v1/models */
  readonly source: string;
  /** starts the model's engine; its start-up lines are the loader's to log */
  readonly load: () => Promise<T>;
  /** bytes it is expected to hold once loaded (the GGUF's size), for the memory budget before the load; default 0 */
  readonly estimatedBytes?: number;
  /** this model's keep-alive in ms (negative = forever); default the registry's */
  readonly keepAliveMs?: number;
}

export interface RegistryOptions<T> {
  /** null or 0: no limit on the number of loaded models */
  readonly maxLoadedModels: number | null;
  /** null: no limit on the loaded models' bytes */
  readonly maxMemoryBytes: number | null;
  /** keep-alive of a model whose requests set none: ms, negative = forever (Ollama's OLLAMA_KEEP_ALIVE, 5 min) */
  readonly defaultKeepAliveMs: number;
  /** requests that may wait for one model's load; past it acquire() throws ModelOverloadedError */
  readonly maxWaitingPerModel: number;
  /** bytes a loaded model holds (measured after its load); default its spec's estimate */
  readonly sizeOf?: (model: T, spec: ModelSpec<T>) => number;
  /** one line per load and unload */
  readonly log?: (line: string) => void;
  /** ms clock (tests pass their own); default Date.now */
  readonly now?: () => number;
}

export type ModelState = "unloaded" | "loading" | "loaded";

/** One model as /v1/models, /api/ps and the metrics see it. */
export interface ModelStatus {
  readonly name: string;
  readonly aliases: readonly string[];
  readonly source: string;
  readonly state: ModelState;
  /** ms since the epoch when an idle model will be unloaded; null: in use, forever, or not loaded */
  readonly expiresAtMs: number | null;
  /** the current keep-alive in ms (negative = forever) */
  readonly keepAliveMs: number;
  readonly bytes: number;
  readonly inUse: number;
  readonly waiting: number;
  readonly loads: number;
  readonly unloads: number;
  /** the last load's duration in ms; null before the first */
  readonly lastLoadMs: number | null;
  /** why the last load failed; null after a good one */
  readonly lastError: string | null;
}

/** No model of that name is served (the route answers 404, vLLM's "The model `x` does not exist."). */
export class ModelNotFoundError extends Error {
  override readonly name = "ModelNotFoundError";
}

/** Too many requests wait for this model's load (vLLM's overload: 503). */
export class ModelOverloadedError extends Error {
  override readonly name = "ModelOverloadedError";
}

/** The model could not be loaded: that model's 503, the server and the other models live on. */
export class ModelLoadError extends Error {
  override readonly name = "ModelLoadError";
}

/** A model held by one request: release it when the request is done (its keep-alive timer starts with the last). */
export interface ModelLease<T> {
  readonly model: T;
  readonly name: string;
  /** ms this request waited for the model's load; 0 when it was loaded already */
  readonly loadMs: number;
  /** `keepAliveMs` (the request's keep_alive) replaces the model's keep-alive; null restores the model's default
   * (an Ollama request without keep_alive, as Ollama does); undefined keeps it */
  release(keepAliveMs?: number | null): void;
}

interface Slot<T> {
  readonly spec: ModelSpec<T>;
  state: ModelState;
  model: T | null;
  loading: Promise<T> | null;
  bytes: number;
  inUse: number;
  waiting: number;
  /** the registry's use counter at this model's last acquire or release: the LRU order (ms clocks tie) */
  lastUse: number;
  keepAliveMs: number;
  timer: ReturnType<typeof setTimeout> | null;
  expiresAtMs: number | null;
  loads: number;
  unloads: number;
  lastLoadMs: number | null;
  lastError: string | null;
  /** the unload under way (its engine stopping), awaited before the same model loads again */
  stopping: Promise<void> | null;
}

export class ModelRegistry<T extends LoadableModel> {
  private readonly slots: Slot<T>[];
  private readonly byName = new Map<string, Slot<T>>();
  /** resolved when a model is released or unloaded: loads waiting for room look again */
  private roomWaiters: (() => void)[] = [];
  private readonly now: () => number;
  private closed = false;
  private uses = 0;

  constructor(specs: readonly ModelSpec<T>[], private readonly options: RegistryOptions<T>) {
    this.now = options.now ?? Date.now;
    this.slots = specs.map((spec) => ({
      spec, state: "unloaded", model: null, loading: null, bytes: 0, inUse: 0, waiting: 0, lastUse: 0,
      keepAliveMs: spec.keepAliveMs ?? options.defaultKeepAliveMs, timer: null, expiresAtMs: null,
      loads: 0, unloads: 0, lastLoadMs: null, lastError: null, stopping: null,
    }));
    for (const slot of this.slots) {
      for (const name of [slot.spec.name, ...(slot.spec.aliases ?? [])]) {
        if (this.byName.has(name)) throw new Error(`the served model name "${name}" is given twice`);
        this.byName.set(name, slot);
      }
    }
  }

  /** Every served model, in the order given. */
  list(): ModelStatus[] {
    return this.slots.map((s) => ({
      name: s.spec.name, aliases: s.spec.aliases ?? [], source: s.spec.source, state: s.state,
      expiresAtMs: s.expiresAtMs, keepAliveMs: s.keepAliveMs, bytes: s.bytes, inUse: s.inUse, waiting: s.waiting,
      loads: s.loads, unloads: s.unloads, lastLoadMs: s.lastLoadMs, lastError: s.lastError,
    }));
  }

  /** The served name of `name` (an alias resolves to its model's first name); null when none is served. */
  canonicalName(name: string): string | null {
    return this.byName.get(name)?.spec.name ?? null;
  }

  /** The loaded model of that name, without loading or holding it (null when it is not loaded). */
  peek(name: string): T | null {
    const slot = this.byName.get(name);
    return slot?.state === "loaded" ? slot.model : null;
  }

  /**
   * The model for one request, loaded first when it is not (waiting in its bounded queue). Throws
   * ModelNotFoundError, ModelOverloadedError or ModelLoadError.
   */
  async acquire(name: string): Promise<ModelLease<T>> {
    const slot = this.byName.get(name);
    if (slot === undefined) throw new ModelNotFoundError(`The model \`${name}\` does not exist.`);
    if (this.closed) throw new ModelLoadError("the server is shutting down");
    // a dead engine is unloaded and loaded afresh: one model's crash is not permanent
    if (slot.state === "loaded" && slot.model?.isHealthy?.() === false) {
      this.options.log?.(`model ${slot.spec.name}: its engine died; loading it again`);
      this.startUnload(slot, "engine dead");
    }
    if (slot.state === "loaded") return this.lease(slot, 0);
    if (slot.waiting >= this.options.maxWaitingPerModel) {
      throw new ModelOverloadedError(`The server is overloaded: ${slot.waiting} requests already wait for model ${slot.spec.name} to load; try again later.`);
    }
    const started = this.now();
    slot.waiting++;
    let model: T;
    try {
      if (slot.state === "unloaded") {
        slot.state = "loading";
        slot.loading = this.load(slot);
      }
      model = await slot.loading!;
    } finally {
      slot.waiting--;
    }
    return this.lease(slot, this.now() - started, model);
  }

  /**
   * Sets a model's keep-alive (Ollama's keep_alive: ms, 0 unloads it once idle, negative keeps it forever) and
   * restarts its idle timer. Returns false when no model of that name is served.
   */
  keepAlive(name: string, keepAliveMs: number): boolean {
    const slot = this.byName.get(name);
    if (slot === undefined) return false;
    slot.keepAliveMs = keepAliveMs;
    this.armIdleTimer(slot);
    return true;
  }

  /** Unloads a model now (in-flight requests keep their engine until it stops); false when it was not loaded. */
  async unload(name: string, reason: UnloadReason = "requested"): Promise<boolean> {
    const slot = this.byName.get(name);
    if (slot === undefined || slot.state !== "loaded") return false;
    await this.startUnload(slot, reason);
    return true;
  }

  /** Stops every loaded model (server shutdown). */
  async shutdown(): Promise<void> {
    this.closed = true;
    const loading = this.slots.map((s) => s.loading).filter((p): p is Promise<T> => p !== null);
    await Promise.allSettled(loading);
    await Promise.allSettled(this.slots.filter((s) => s.state === "loaded").map((s) => this.startUnload(s, "shutdown")));
    await Promise.allSettled(this.slots.map((s) => s.stopping));
    this.wakeRoomWaiters();
  }

  private lease(slot: Slot<T>, loadMs: number, model: T = slot.model!): ModelLease<T> {
    slot.inUse++;
    slot.lastUse = ++this.uses;
    this.clearIdleTimer(slot);
    let released = false;
    return {
      model, name: slot.spec.name, loadMs,
      release: (keepAliveMs) => {
        if (released) return;
        released = true;
        slot.inUse--;
        slot.lastUse = ++this.uses;
        if (keepAliveMs !== undefined) slot.keepAliveMs = keepAliveMs ?? slot.spec.keepAliveMs ?? this.options.defaultKeepAliveMs;
        this.armIdleTimer(slot);
        this.wakeRoomWaiters();
      },
    };
  }

  private async load(slot: Slot<T>): Promise<T> {
    try {
      await slot.stopping;
      await this.makeRoom(slot);
      if (this.closed) throw new Error("the server is shutting down");
      this.options.log?.(`loading model ${slot.spec.name} (${slot.spec.source})`);
      const started = this.now();
      const model = await slot.spec.load();
      slot.lastLoadMs = this.now() - started;
      slot.model = model;
      slot.bytes = this.options.sizeOf?.(model, slot.spec) ?? slot.spec.estimatedBytes ?? 0;
      slot.state = "loaded";
      slot.loads++;
      slot.lastError = null;
      this.options.log?.(`loaded model ${slot.spec.name} in ${slot.lastLoadMs} ms (${this.loadedCount()} loaded)`);
      if (this.closed) void this.startUnload(slot, "shutdown");
      return model;
    } catch (e) {
      slot.state = "unloaded";
      slot.lastError = errorMessage(e);
      this.options.log?.(`model ${slot.spec.name} failed to load: ${slot.lastError}`);
      this.wakeRoomWaiters();
      throw new ModelLoadError(`The model \`${slot.spec.name}\` could not be loaded: ${slot.lastError}`);
    } finally {
      slot.loading = null;
    }
  }

  /** Unloads least recently used idle models until `slot` fits both budgets; waits for a release when none is idle. */
  private async makeRoom(slot: Slot<T>): Promise<void> {
    const { maxLoadedModels, maxMemoryBytes } = this.options;
    const need = slot.spec.estimatedBytes ?? 0;
    for (;;) {
      if (this.closed) return;
      // the other models that hold (or are about to hold) memory: loaded, loading, or still stopping
      const others = this.slots.filter((s) => s !== slot && (s.state !== "unloaded" || s.stopping !== null));
      const countFits = maxLoadedModels === null || maxLoadedModels <= 0 || others.length < maxLoadedModels;
      const bytesFit = maxMemoryBytes === null || others.reduce((sum, s) => sum + s.bytes, 0) + need <= maxMemoryBytes;
      if (countFits && bytesFit) return;
      const victim = others
        .filter((s) => s.state === "loaded" && s.inUse === 0 && s.waiting === 0)
        .sort((a, b) => a.lastUse - b.lastUse)[0];
      if (victim !== undefined) {
        await this.startUnload(victim, countFits ? "memory limit" : "max loaded models");
        continue;
      }
      // nothing idle to unload: a model being stopped frees room when it is gone; a held one when released
      const stopping = others.find((s) => s.stopping !== null && s.state === "unloaded");
      if (stopping !== undefined) { await stopping.stopping; continue; }
      if (others.length === 0) return; // the model alone is over the memory budget: load it anyway, as Ollama does
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    }
  }

  private startUnload(slot: Slot<T>, reason: UnloadReason): Promise<void> {
    if (slot.state !== "loaded" || slot.model === null) return slot.stopping ?? Promise.resolve();
    const model = slot.model;
    this.clearIdleTimer(slot);
    slot.state = "unloaded";
    slot.model = null;
    slot.unloads++;
    this.options.log?.(`unloading model ${slot.spec.name} (${reason})`);
    // the closure clears slot.stopping only if it is still its own promise
    let stopping: Promise<void> | null = null;
    const started = this.now();
    stopping = (async () => {
      try {
        await model.shutdown(reason);
      } catch (e) {
        this.options.log?.(`model ${slot.spec.name} did not stop cleanly: ${errorMessage(e)}`);
      }
      slot.bytes = 0;
      if (slot.stopping === stopping) slot.stopping = null;
      this.options.log?.(`unloaded model ${slot.spec.name} in ${this.now() - started} ms (${this.loadedCount()} loaded)`);
      this.wakeRoomWaiters();
    })();
    slot.stopping = stopping;
    return stopping;
  }

  /** Ollama's idle timer: starts when the model's last request ends; 0 unloads now, negative never. */
  private armIdleTimer(slot: Slot<T>): void {
    this.clearIdleTimer(slot);
    if (slot.state !== "loaded" || slot.inUse > 0 || slot.waiting > 0 || slot.keepAliveMs < 0) return;
    if (slot.keepAliveMs === 0) { void this.startUnload(slot, "keep_alive 0"); return; }
    slot.expiresAtMs = this.now() + slot.keepAliveMs;
    slot.timer = setTimeout(() => { slot.timer = null; void this.startUnload(slot, "idle past its keep_alive"); }, slot.keepAliveMs);
    // an idle timer must not keep the process alive on its own
    (slot.timer as { unref?: () => void }).unref?.();
  }

  private clearIdleTimer(slot: Slot<T>): void {
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    slot.expiresAtMs = null;
  }

  private loadedCount(): number {
    return this.slots.filter((s) => s.state === "loaded").length;
  }

  private wakeRoomWaiters(): void {
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const wake of waiters) wake();
  }
}
